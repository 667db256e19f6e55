package readout

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-daq/sluice/schemas"
)

// Sink receives the packets of an input. *builder.Builder satisfies it.
// The packet's bytes stay valid until the sink calls release, exactly once,
// also when AddPacket returns an error; ring space and TCP credits are
// returned only then.
type Sink interface {
	AddPacket(ctx context.Context, p schemas.MFP, release func()) error
}

// Input is one readout input: a ring, a listening socket or a file.
type Input interface {
	// Run hands every packet to sink until the input ends (ring closed by
	// its writer, end of file, Config.ExpectStreams streams ended) or ctx
	// is cancelled; both return nil. It returns the sink's error, or an
	// error that makes the input unusable (e.g. ErrWriterDead).
	Run(ctx context.Context, sink Sink) error
	// Stats is a consistent-enough snapshot of the counters, safe to call
	// while Run runs.
	Stats() Stats
}

// Discard reasons: why a received packet was not handed to the sink.
const (
	ReasonTruncated             = "truncated"               // the MFP ends before its packet_size
	ReasonMalformed             = "malformed"               // any other MFP decode error
	ReasonTruncatedAtDisconnect = "truncated_at_disconnect" // TCP: connection closed mid-packet
	ReasonLate                  = "late"                    // UDP: arrived after its sequence number was declared lost
	ReasonDuplicate             = "duplicate"               // UDP: a sequence number already received
	ReasonProtocol              = "protocol"                // TCP: frame larger than the credit window, bad preamble
)

var reasons = [...]string{ReasonTruncated, ReasonMalformed, ReasonTruncatedAtDisconnect, ReasonLate, ReasonDuplicate, ReasonProtocol}

const (
	rTruncated = iota
	rMalformed
	rTruncatedAtDisconnect
	rLate
	rDuplicate
	rProtocol
)

// Stats are an input's counters, ready to be exported as metrics.
type Stats struct {
	Packets   uint64 // packets handed to the sink
	Fragments uint64 // their fragments
	Bytes     uint64 // their bytes (whole MFPs)
	// Discarded counts received packets not handed on, by reason (Reason*).
	Discarded map[string]uint64
	// Lost counts UDP sequence numbers declared missing (window passed them).
	Lost uint64
	// SinkWaitNs is the time spent inside Sink.AddPacket (backpressure).
	SinkWaitNs uint64
	// HeldBytes are bytes handed to the sink and not yet released.
	HeldBytes int64
	// WriterThrottleNs: shm, the ring writer's total wait for space.
	WriterThrottleNs uint64
	// CreditsOutstanding: TCP, bytes granted to senders and not yet used.
	CreditsOutstanding int64
	// SocketBufferBytes: TCP/UDP, SO_RCVBUF as the kernel reports it (Linux
	// reports twice the bytes granted: the other half is its bookkeeping).
	SocketBufferBytes int
	// Connections: TCP connections accepted; Streams: streams ended cleanly
	// (TCP end-of-stream frames, UDP end markers); Open: connections open.
	Connections, Streams uint64
	Open                 int64
}

// DiscardTotal sums Discarded.
func (s Stats) DiscardTotal() uint64 {
	var n uint64
	for _, v := range s.Discarded {
		n += v
	}
	return n
}

// counters are the atomics behind Stats shared by every input.
type counters struct {
	packets, fragments, bytes, lost, sinkWait atomic.Uint64
	connections, streams                      atomic.Uint64
	held, open                                atomic.Int64
	discarded                                 [len(reasons)]atomic.Uint64
}

func (c *counters) snapshot() Stats {
	s := Stats{
		Packets: c.packets.Load(), Fragments: c.fragments.Load(), Bytes: c.bytes.Load(),
		Lost: c.lost.Load(), SinkWaitNs: c.sinkWait.Load(), HeldBytes: c.held.Load(),
		Connections: c.connections.Load(), Streams: c.streams.Load(), Open: c.open.Load(),
		Discarded: make(map[string]uint64, len(reasons)),
	}
	for i, r := range reasons {
		if v := c.discarded[i].Load(); v > 0 {
			s.Discarded[r] = v
		}
	}
	return s
}

// deliver decodes rec (exactly one MFP) and hands it to sink; a packet that
// does not decode is counted and released here. release must be safe to
// call exactly once.
func (c *counters) deliver(ctx context.Context, sink Sink, rec []byte, release func()) error {
	p, n, err := schemas.DecodeMFP(rec)
	if err == nil && n != len(rec) {
		err = schemas.Errorf("mfp", "packet", int64(n), schemas.ErrInconsistent, "%d bytes after a packet of %d", len(rec)-n, n)
	}
	if err != nil {
		if errors.Is(err, schemas.ErrTruncated) {
			c.discarded[rTruncated].Add(1)
		} else {
			c.discarded[rMalformed].Add(1)
		}
		release()
		return nil
	}
	return c.hand(ctx, sink, p, release)
}

// hand gives a decoded packet to the sink, counting it and the time the
// sink held the caller up. (Held bytes are counted by each input's release,
// which needs no extra closure per packet.)
func (c *counters) hand(ctx context.Context, sink Sink, p schemas.MFP, release func()) error {
	t0 := time.Now()
	err := sink.AddPacket(ctx, p, release)
	c.sinkWait.Add(uint64(time.Since(t0)))
	if err != nil {
		return err
	}
	c.packets.Add(1)
	c.fragments.Add(uint64(p.N))
	c.bytes.Add(uint64(len(p.Bytes())))
	return nil
}

// Endpoint is a parsed readout URI.
type Endpoint struct {
	Scheme string // "shm", "tcp", "udp" or "file"
	// Target is the ring name (shm), host:port (tcp, udp) or path (file).
	Target string
	// Options are the URI's query parameters, checked by the input or
	// output that uses them (e.g. udp://...?format=vtp).
	Options url.Values
}

func (e Endpoint) String() string {
	s := e.Scheme + "://" + e.Target
	if len(e.Options) > 0 {
		s += "?" + e.Options.Encode()
	}
	return s
}

// ParseURI parses shm://NAME, tcp://HOST:PORT, udp://HOST:PORT or
// file://PATH (an absolute or relative path), with optional ?key=value
// options. Errors wrap ErrBadURI and say what was expected.
func ParseURI(s string) (Endpoint, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return Endpoint{}, fmt.Errorf("%w %q: want shm://NAME, tcp://HOST:PORT, udp://HOST:PORT or file://PATH", ErrBadURI, s)
	}
	target, query, _ := strings.Cut(rest, "?")
	opts, err := url.ParseQuery(query)
	if err != nil {
		return Endpoint{}, fmt.Errorf("%w %q: options: %v", ErrBadURI, s, err)
	}
	e := Endpoint{Scheme: scheme, Target: target, Options: opts}
	switch scheme {
	case "shm":
		if _, err := ringPath(target); err != nil {
			return Endpoint{}, fmt.Errorf("%w %q: ring name must be a plain file name under %s", ErrBadURI, s, ShmDir)
		}
	case "tcp", "udp":
		host, port, err := net.SplitHostPort(target)
		if err != nil {
			return Endpoint{}, fmt.Errorf("%w %q: want %s://HOST:PORT: %v", ErrBadURI, s, scheme, err)
		}
		if p, err := strconv.ParseUint(port, 10, 16); err != nil || (p == 0 && host == "") {
			return Endpoint{}, fmt.Errorf("%w %q: port %q is not a number in 0..65535", ErrBadURI, s, port)
		}
	case "file":
		if target == "" {
			return Endpoint{}, fmt.Errorf("%w %q: empty path", ErrBadURI, s)
		}
	default:
		return Endpoint{}, fmt.Errorf("%w %q: unknown scheme %q (want shm, tcp, udp or file)", ErrBadURI, s, scheme)
	}
	return e, nil
}

// checkOptions rejects options of e that are not in allowed.
func (e Endpoint) checkOptions(allowed ...string) error {
	for k := range e.Options {
		found := false
		for _, a := range allowed {
			found = found || k == a
		}
		if !found {
			return fmt.Errorf("%w %s: unknown option %q for %s (known: %s)", ErrBadURI, e, k, e.Scheme, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// Config configures the inputs; zero values take the defaults.
type Config struct {
	Ring ReaderConfig // shm
	// CreditWindow is the bytes of credit each TCP connection is granted
	// (default 8 MiB); a sender never has more than this in flight
	// unreleased, and no packet may be larger.
	CreditWindow int
	// SocketBuffer is the SO_RCVBUF requested for TCP and UDP sockets
	// (default 8 MiB; the granted size is in Stats.SocketBufferBytes).
	SocketBuffer int
	// ReorderWindow (UDP, in datagrams, default 256) and LatencyBudget
	// (default 20 ms): a missing sequence number is declared lost when a
	// datagram ReorderWindow past it arrives or when the datagram after it
	// has waited LatencyBudget.
	ReorderWindow int
	LatencyBudget time.Duration
	// Datagram turns a UDP datagram's payload into a packet (default
	// DecodeMFPDatagram; DecodeVTPDatagram for VTP; set by ?format=).
	Datagram DatagramDecoder
	// ExpectStreams (TCP, UDP): when > 0, Run returns nil once this many
	// senders ended their stream cleanly.
	ExpectStreams int
}

const (
	DefaultCreditWindow  = 8 << 20
	DefaultSocketBuffer  = 8 << 20
	DefaultReorderWindow = 256
	DefaultLatencyBudget = 20 * time.Millisecond
)

func (c Config) withDefaults() Config {
	if c.CreditWindow <= 0 {
		c.CreditWindow = DefaultCreditWindow
	}
	if c.SocketBuffer <= 0 {
		c.SocketBuffer = DefaultSocketBuffer
	}
	if c.ReorderWindow <= 0 {
		c.ReorderWindow = DefaultReorderWindow
	}
	if c.LatencyBudget <= 0 {
		c.LatencyBudget = DefaultLatencyBudget
	}
	if c.Datagram == nil {
		c.Datagram = DecodeMFPDatagram
	}
	return c
}

// Open parses uri and opens the input: TCP and UDP inputs listen at once
// (so the address is known before Run), a ring is attached in Run (it
// waits for the writer to create it).
func Open(uri string, cfg Config) (Input, error) {
	e, err := ParseURI(uri)
	if err != nil {
		return nil, err
	}
	switch e.Scheme {
	case "shm":
		if err := e.checkOptions(); err != nil {
			return nil, err
		}
		return NewShmInput(e.Target, cfg), nil
	case "tcp":
		if err := e.checkOptions(); err != nil {
			return nil, err
		}
		return ListenTCP(e.Target, cfg)
	case "udp":
		if err := e.checkOptions("format"); err != nil {
			return nil, err
		}
		switch f := e.Options.Get("format"); f {
		case "", "mfp":
		case "vtp":
			cfg.Datagram = DecodeVTPDatagram
		default:
			return nil, fmt.Errorf("%w %s: format %q (want mfp or vtp)", ErrBadURI, e, f)
		}
		return ListenUDP(e.Target, cfg)
	default: // "file"
		if err := e.checkOptions(); err != nil {
			return nil, err
		}
		return NewFileInput(e.Target), nil
	}
}
