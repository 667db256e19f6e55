package transport

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/sluice-daq/sluice/internal/conf"
)

// Transport is one way packets travel into a node, registered once by its
// package (see package all) with everything the node, its configuration
// and the emulator need: its URI form and options, its input's settings
// and opener, its sender's settings and opener. A transport may have only
// one of the two ends.
type Transport struct {
	// Scheme is the URI scheme, e.g. "tcp".
	Scheme string
	// Target says what follows "SCHEME://" in messages: "NAME",
	// "HOST:PORT", "PATH".
	Target string
	// Query lists the URI options it takes (each at most once).
	Query []string
	// About says in a line what the transport is, for help texts.
	About string
	// CheckTarget checks a URI's target and option values (nil: any
	// non-empty target); its error says what was expected.
	CheckTarget func(u URI) error
	// Payload says what one packet carries at u (nil: PayloadMFP).
	Payload func(u URI) Payload
	// Embeddable: an emulator embedded in the node may feed the input,
	// sender and input running side by side in one process.
	Embeddable bool

	// NewInputOptions returns the input's settings with their defaults: a
	// pointer to the transport's own struct, whose yaml tags are the keys
	// operators write beside the input's uri.
	NewInputOptions func() InputOptions
	// OpenInput opens the input at u with o (made by NewInputOptions): a
	// socket listens at once (so its address is known before Run), a ring
	// is attached in Run.
	OpenInput func(u URI, o InputOptions) (Input, error)
	// Preflight checks what the input at u needs on this machine (a file
	// to read exists); nil: nothing.
	Preflight func(u URI) error
	// ClearStale is called before an input fed by an embedded emulator
	// opens: it removes what a killed run left at u that the input must
	// not attach to (a ring file), and returns each file it removed, for
	// the log (also with an error: those removed before it). What a live
	// process uses is refused, never removed. nil: nothing to clear.
	ClearStale func(u URI) ([]Reclaimed, error)

	// NewSenderOptions returns the sender's settings with their defaults,
	// as NewInputOptions (their keys are written in the emulator's
	// section).
	NewSenderOptions func() SenderOptions
	// OpenSender connects (or creates the ring, the file) for a sender of
	// packets from the given number of sources.
	OpenSender func(ctx context.Context, u URI, o SenderOptions, sources int) (Sender, error)
}

// InputOptions are one transport's input settings: a pointer to its own
// struct, decoded from the keys beside the input's uri (its fields' yaml
// tags), each documented for operators by its field's doc tag (the node's
// commented default configuration shows it with the default).
type InputOptions interface {
	// Check returns the problems of these settings for an input at u, with
	// paths relative to the input ("credit_window").
	Check(u URI) conf.Problems
	// Ends reports whether such an input ends by itself: a file at its
	// end, a ring when its writer closed it, sockets once the expected
	// senders ended their streams.
	Ends() bool
}

// Memory is implemented by input and sender settings whose input or
// sender holds memory on the node beyond a few buffers: a readout ring, a
// receive window per connection. The node's memory budget must cover it.
type Memory interface {
	// MemoryBytes is the most it holds, in bytes.
	MemoryBytes() int64
	// SharedMemory reports whether that memory is shared memory (a ring),
	// outside the Go heap.
	SharedMemory() bool
}

// SenderOptions are one transport's sender settings, as InputOptions.
type SenderOptions interface {
	// Check returns the problems of these settings for a sender to u,
	// with paths relative to the emulator's section ("ring_size", or ""
	// for the sender as a whole).
	Check(u URI) conf.Problems
}

var (
	mu         sync.RWMutex
	transports = map[string]*Transport{}
	order      []*Transport // in registration order, for messages
)

// Register adds t. It panics on a scheme that is empty, not lower-case
// letters and digits, or registered twice, and on a transport with
// neither end: these are programming errors of the transport's package.
func Register(t Transport) {
	mu.Lock()
	defer mu.Unlock()
	if t.Scheme == "" || strings.Trim(t.Scheme, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
		panic(fmt.Sprintf("transport.Register: scheme %q is not lower-case letters and digits", t.Scheme))
	}
	if _, dup := transports[t.Scheme]; dup {
		panic(fmt.Sprintf("transport.Register: scheme %q registered twice", t.Scheme))
	}
	if (t.NewInputOptions == nil) != (t.OpenInput == nil) || (t.NewSenderOptions == nil) != (t.OpenSender == nil) || (t.OpenInput == nil && t.OpenSender == nil) {
		panic(fmt.Sprintf("transport.Register: %s:// needs an input (NewInputOptions and OpenInput), a sender (NewSenderOptions and OpenSender) or both", t.Scheme))
	}
	p := &t
	transports[t.Scheme] = p
	order = append(order, p)
}

// Lookup returns the transport of scheme, nil if none is registered.
func Lookup(scheme string) *Transport {
	mu.RLock()
	defer mu.RUnlock()
	return transports[scheme]
}

// Registered lists the transports in the order they were registered.
func Registered() []*Transport {
	mu.RLock()
	defer mu.RUnlock()
	return append([]*Transport(nil), order...)
}

// Forms lists the URI forms of the registered transports for messages:
// "shm://NAME, tcp://HOST:PORT or file://PATH".
func Forms() string { return forms(func(*Transport) bool { return true }) }

// EmbeddableForms is Forms of the transports an embedded emulator may feed.
func EmbeddableForms() string { return forms(func(t *Transport) bool { return t.Embeddable }) }

func forms(keep func(*Transport) bool) string {
	var s []string
	for _, t := range Registered() {
		if keep(t) {
			s = append(s, t.Form())
		}
	}
	switch len(s) {
	case 0:
		return "a registered transport (none is)"
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// Form is the transport's URI form with its options, e.g.
// "peer://HOST:PORT[?transport=...]".
func (t *Transport) Form() string {
	f := t.Scheme + "://" + t.Target
	if len(t.Query) > 0 {
		f += "[?" + strings.Join(t.Query, "=...&") + "=...]"
	}
	return f
}

// PayloadOf is what one packet carries at u.
func PayloadOf(u URI) Payload {
	if t := Lookup(u.Scheme); t != nil && t.Payload != nil {
		return t.Payload(u)
	}
	return PayloadMFP
}

// OpenInput parses uri and opens its input with o (nil: the transport's
// defaults; otherwise made by the same transport's NewInputOptions, else
// ErrOptions).
func OpenInput(uri string, o InputOptions) (Input, error) {
	u, err := ParseURI(uri)
	if err != nil {
		return nil, err
	}
	t := Lookup(u.Scheme)
	if t.OpenInput == nil {
		return nil, fmt.Errorf("%w %q: %s:// has no input", ErrBadURI, uri, u.Scheme)
	}
	if o == nil {
		o = t.NewInputOptions()
	} else if err := sameType(u, o, t.NewInputOptions()); err != nil {
		return nil, err
	}
	return t.OpenInput(u, o)
}

// OpenSender parses uri and opens its sender for packets of the given
// number of sources with o (nil: the transport's defaults; otherwise made
// by the same transport's NewSenderOptions, else ErrOptions).
func OpenSender(ctx context.Context, uri string, o SenderOptions, sources int) (Sender, error) {
	u, err := ParseURI(uri)
	if err != nil {
		return nil, err
	}
	t := Lookup(u.Scheme)
	if t.OpenSender == nil {
		return nil, fmt.Errorf("%w %q: %s:// has no sender", ErrBadURI, uri, u.Scheme)
	}
	if o == nil {
		o = t.NewSenderOptions()
	} else if err := sameType(u, o, t.NewSenderOptions()); err != nil {
		return nil, err
	}
	return t.OpenSender(ctx, u, o, sources)
}

func sameType(u URI, got, want any) error {
	if reflect.TypeOf(got) != reflect.TypeOf(want) {
		return fmt.Errorf("%w: %T for %s (want %T)", ErrOptions, got, u, want)
	}
	return nil
}

// Reclaimed is a file a dead process left that Transport.ClearStale removed.
type Reclaimed struct {
	What     string // what it was, e.g. "ring"
	Path     string // the file
	PID      uint32 // the dead process that created it (a ring's writer), 0 if it names none
	OtherPID uint32 // another dead process that used it (a ring's reader), 0: none
	Bytes    int64  // the space it held
}
