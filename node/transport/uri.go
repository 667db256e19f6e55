package transport

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// URI is a parsed transport address: SCHEME://TARGET?KEY=VALUE&...
type URI struct {
	Scheme string // a registered transport's scheme, e.g. "tcp"
	// Target is what follows "SCHEME://" up to any "?", as written: a
	// ring name, HOST:PORT, a path (file://x.mfp is the relative path
	// x.mfp, file:///data/x.mfp an absolute one).
	Target string
	// Query holds the URI's options, each key once and one its transport
	// takes (e.g. udp://...?format=vtp).
	Query url.Values
}

// Option is the value of option key, "" when absent.
func (u URI) Option(key string) string { return u.Query.Get(key) }

func (u URI) String() string {
	s := u.Scheme + "://" + u.Target
	if len(u.Query) > 0 {
		s += "?" + u.Query.Encode()
	}
	return s
}

// URIError is a URI that cannot be parsed or is not one its transport
// takes; it wraps ErrBadURI.
type URIError struct {
	URI  string // as written
	Want string // what is wrong, said as what was expected
}

func (e *URIError) Error() string { return fmt.Sprintf("%v %q: %s", ErrBadURI, e.URI, e.Want) }
func (e *URIError) Unwrap() error { return ErrBadURI }

// ParseURI parses SCHEME://TARGET[?KEY=VALUE...] for a registered scheme:
// the target and options are checked by the scheme's transport, an option
// it does not take or given twice is refused. Errors are *URIError.
//
// It is the one parser of transport URIs: the node's configuration checks
// inputs with it, inputs and senders open what it returns. It splits at the
// first "://" and the first "?" and does not unescape the target, so a
// file path is taken as written; the options are URL query syntax.
func ParseURI(s string) (URI, error) {
	bad := func(format string, args ...any) (URI, error) {
		return URI{}, &URIError{URI: s, Want: fmt.Sprintf(format, args...)}
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || scheme == "" {
		return bad("want %s", Forms())
	}
	t := Lookup(scheme)
	if t == nil {
		return bad("unknown scheme %q: want %s", scheme, Forms())
	}
	target, query, _ := strings.Cut(rest, "?")
	opts, err := url.ParseQuery(query)
	if err != nil {
		return bad("options: %v", err)
	}
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		switch {
		case !slices.Contains(t.Query, k) && len(t.Query) == 0:
			return bad("unknown option %q: %s:// takes no options", k, scheme)
		case !slices.Contains(t.Query, k):
			return bad("unknown option %q: %s:// takes %s", k, scheme, strings.Join(t.Query, ", "))
		case len(opts[k]) > 1:
			return bad("option %q given %d times: give it once", k, len(opts[k]))
		}
	}
	u := URI{Scheme: scheme, Target: target, Query: opts}
	check := t.CheckTarget
	if check == nil {
		check = func(u URI) error {
			if u.Target == "" {
				return fmt.Errorf("want %s", t.Form())
			}
			return nil
		}
	}
	if err := check(u); err != nil {
		return bad("%v", err)
	}
	return u, nil
}

// CheckHostPort is the target check of network transports: HOST:PORT, the
// host a name or address (empty or [::] for every interface), the port a
// number 0..65535 (0 lets a listener's kernel pick one; senders need a
// real one, see CheckSendPort).
func CheckHostPort(u URI) error {
	_, port, err := net.SplitHostPort(u.Target)
	if err != nil {
		return fmt.Errorf("want %s://HOST:PORT: %v", u.Scheme, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("want %s://HOST:PORT with a port 0..65535, not %q", u.Scheme, port)
	}
	return nil
}

// CheckSendPort refuses port 0 to a sender (SendPortWant says why); u
// passed CheckHostPort.
func CheckSendPort(u URI) error {
	if want := SendPortWant(u); want != "" {
		return &URIError{URI: u.String(), Want: want}
	}
	return nil
}

// SendPortWant is what is wrong with u's port for a sender, "" if nothing:
// port 0 picks a free port to listen on, there is nothing to send to.
func SendPortWant(u URI) string {
	if _, port, err := net.SplitHostPort(u.Target); err == nil && port == "0" {
		return "a sender needs the port its receiver listens on (1..65535), not 0"
	}
	return ""
}
