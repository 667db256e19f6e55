package tcp

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/node/transport"
)

// Transport registers tcp://HOST:PORT[?framing=sluice|ferol] (see package
// all).
var Transport = transport.Transport{
	Scheme:      "tcp",
	Target:      "HOST:PORT",
	Query:       []string{"framing"},
	About:       "a TCP input (credit-based flow control, sources spread over the connections; ?framing=ferol: CMS FEROL streams)",
	CheckTarget: checkTarget,
	Payload: func(u transport.URI) transport.Payload {
		if u.Option("framing") == FramingFEROL {
			return transport.PayloadFEROL
		}
		return transport.PayloadMFP
	},
	Embeddable:      true,
	NewInputOptions: func() transport.InputOptions { o := DefaultOptions(); return &o },
	OpenInput: func(u transport.URI, o transport.InputOptions) (transport.Input, error) {
		opts := *o.(*Options)
		opts.Framing = u.Option("framing")
		return Listen(u.Target, opts)
	},
	NewSenderOptions: func() transport.SenderOptions { return &SenderOptions{SocketBuffer: DefaultSendBuffer} },
	OpenSender: func(ctx context.Context, u transport.URI, o transport.SenderOptions, sources int) (transport.Sender, error) {
		if err := transport.CheckSendPort(u); err != nil {
			return nil, err
		}
		so := o.(*SenderOptions)
		if u.Option("framing") == FramingFEROL {
			return NewFEROLSender(ctx, u.Target, so.Connections, sources, int(so.SocketBuffer))
		}
		return NewSender(ctx, u.Target, *so, sources)
	},
}

// Framings, the URI's ?framing=: what a connection carries.
const (
	// FramingSluice is sluice's own readout stream (the default): a
	// preamble, credit grants, length-prefixed MFPs.
	FramingSluice = "sluice"
	// FramingFEROL is the CMS FEROL -> DAQ stream: FEROL blocks (package
	// schemas/cms), no preamble, no credits (TCP's own window throttles
	// the sender), as a FEROL sends to CMS's first-layer event builders.
	FramingFEROL = "ferol"
)

func checkTarget(u transport.URI) error {
	if err := transport.CheckHostPort(u); err != nil {
		return err
	}
	if f := u.Option("framing"); f != "" && f != FramingSluice && f != FramingFEROL {
		return fmt.Errorf("framing %q: want %s or %s", f, FramingSluice, FramingFEROL)
	}
	return nil
}

// Defaults of Options and SenderOptions.
const (
	DefaultCreditWindow = 8 << 20
	DefaultSocketBuffer = 8 << 20
	DefaultSendBuffer   = 4 << 20
	// DefaultPreambleTimeout is Options.PreambleTimeout's default.
	DefaultPreambleTimeout = 10 * time.Second
)

// Options are a TCP input's settings; zero values take the defaults.
type Options struct {
	// CreditWindow is the bytes of credit each connection is granted
	// (default 8 MiB); a sender never has more than this in flight
	// unreleased, and no packet may be larger. FEROL streams get no
	// credit: for them it is the largest FED fragment taken.
	CreditWindow conf.ByteSize `yaml:"credit_window" doc:"bytes granted per connection before the sender waits (?framing=ferol: the largest FED fragment)"`
	// SocketBuffer is the SO_RCVBUF requested (default 8 MiB; the size
	// granted is in Stats.SocketBufferBytes).
	SocketBuffer conf.ByteSize `yaml:"socket_buffer" doc:"SO_RCVBUF requested"`
	// ExpectStreams: when > 0, Run returns nil once this many senders
	// ended their stream cleanly (0: it runs until it is stopped).
	ExpectStreams int `yaml:"expect_streams" doc:"end the input after this many senders finished (0 = never)"`
	// MaxConnections: a connection accepted while this many are open is
	// closed at once and counted (Stats.Refused["max_connections"]): the bound on the
	// descriptors and receive buffers one input takes, and the streams its
	// memory is planned for (MemoryBytes). 0: ExpectStreams when that is
	// set, else DefaultStreams. Every stream's buffers are in the memory
	// budget, so there is no unlimited setting: an input planned for fewer
	// streams than connect refuses the others rather than grow past it.
	MaxConnections int `yaml:"max_connections" doc:"connections open at once, the streams its memory is planned for; more are refused and counted (0 = expect_streams, or 4 without it)"`
	// PreambleTimeout: a connection whose preamble (the stream's first 8
	// bytes, 64 in version 2) has not fully arrived this long after it was
	// accepted is closed, counted (Stats.Closed["preamble_timeout"]) and
	// logged with its remote address; it frees its place under
	// MaxConnections. Default 10 s. FEROL streams have no preamble: no
	// deadline.
	PreambleTimeout time.Duration `yaml:"preamble_timeout" doc:"a connection that sent no preamble this long after it connected is closed, counted and logged (?framing=ferol: unused)"`
	// Framing is what the connections carry, from the URI's ?framing=:
	// FramingSluice ("" too) or FramingFEROL.
	Framing string `yaml:"-"`
}

// DefaultStreams is the connections an input with neither ExpectStreams
// nor MaxConnections takes at once: a readout's default (min(sources, 4)).
const DefaultStreams = 4

// DefaultOptions are the settings of an input configured with none.
func DefaultOptions() Options {
	return Options{CreditWindow: DefaultCreditWindow, SocketBuffer: DefaultSocketBuffer, PreambleTimeout: DefaultPreambleTimeout}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.CreditWindow <= 0 {
		o.CreditWindow = d.CreditWindow
	}
	if o.SocketBuffer <= 0 {
		o.SocketBuffer = d.SocketBuffer
	}
	if o.PreambleTimeout <= 0 {
		o.PreambleTimeout = d.PreambleTimeout
	}
	return o
}

// MemoryBytes is the receive buffers the input holds at most: per stream
// its credit window (frames the sink holds, counted with the rest of each
// chunk they pin) plus the chunk it reads into (an eighth of the window,
// 4 KiB to 1 MiB), for the connections it takes at once (MaxConnections,
// or ExpectStreams, or DefaultStreams). A frame larger than a chunk reads into a chunk of its own,
// its size rounded up to a power of two, which that stream holds on top.
// The kernel's socket buffers (SocketBuffer) are not included: they are
// kernel memory. A FEROL stream (Framing) holds less: the fragment it
// reads, up to the credit window, and a read buffer of a chunk's size
// (the fragments it hands on are copies, the builder's memory).
func (o *Options) MemoryBytes() int64 {
	d := o.withDefaults()
	w := int64(d.CreditWindow)
	n, _ := d.streams()
	return (w + int64(chunkSizesFor(w).chunk)) * int64(n)
}

// streams is the number of connections the input takes at once, which its
// memory is planned for, and the setting it comes from.
func (o Options) streams() (int, string) {
	switch {
	case o.MaxConnections > 0:
		return o.MaxConnections, "max_connections"
	case o.ExpectStreams > 0:
		return o.ExpectStreams, "expect_streams"
	}
	return DefaultStreams, "default"
}

// SharedMemory: receive buffers are on the Go heap.
func (*Options) SharedMemory() bool { return false }

// Check wants a credit window of 64 KiB to 1 GiB, a socket buffer of at
// most 1 GiB, a number of streams >= 0 and max_connections, when set, at
// least expect_streams, and a preamble_timeout of 0 (the default) or 1 ms
// to 1 h.
func (o *Options) Check(transport.URI) conf.Problems {
	var ps conf.Problems
	if o.CreditWindow < 64<<10 || o.CreditWindow > 1<<30 {
		ps.Add("credit_window", o.CreditWindow, "want 64KiB..1GiB")
	}
	if o.SocketBuffer > 1<<30 {
		ps.Add("socket_buffer", o.SocketBuffer, "want at most 1GiB")
	}
	if o.ExpectStreams < 0 {
		ps.Add("expect_streams", o.ExpectStreams, "want 0, or a number of senders")
	}
	if o.MaxConnections < 0 || o.MaxConnections > 1<<20 {
		ps.Add("max_connections", o.MaxConnections, "want 0 (expect_streams, or %d) .. 1048576", DefaultStreams)
	} else if o.MaxConnections > 0 && o.ExpectStreams > o.MaxConnections {
		ps.Add("max_connections", o.MaxConnections, "fewer than expect_streams (%d): the input could never end", o.ExpectStreams)
	}
	if o.PreambleTimeout != 0 && (o.PreambleTimeout < time.Millisecond || o.PreambleTimeout > time.Hour) {
		ps.Add("preamble_timeout", o.PreambleTimeout, "want 1ms..1h (0: %s)", DefaultPreambleTimeout)
	}
	return ps
}

// Ends: the input ends once the expected senders ended their streams, if
// it was told how many there are.
func (o *Options) Ends() bool { return o.ExpectStreams > 0 }

// SenderOptions are the settings of a TCP sender.
type SenderOptions struct {
	// Connections to open; source s goes on connection s mod Connections
	// (0: min(sources, 4)).
	Connections int `yaml:"connections" doc:"sender connections (0 = min(sources, 4))"`
	// SocketBuffer is the SO_SNDBUF requested (default 4 MiB; 0: the
	// system's).
	SocketBuffer conf.ByteSize `yaml:"socket_buffer" doc:"SO_SNDBUF requested"`
	// StreamVersion is the readout stream version sent (the package
	// documentation): StreamVersion2 (0 too), or StreamVersion1 for a
	// receiver that reads only version 1 (it closes a version 2 stream as
	// a protocol violation). A FEROL stream (?framing=ferol) has none.
	StreamVersion int `yaml:"stream_version" doc:"readout stream version sent: 2 (0 = 2), or 1 for a receiver that reads only version 1"`
}

// Check wants 0 to 1024 connections, a stream version of 0, 1 or 2 (none
// with ?framing=ferol) and a port to send to.
func (o *SenderOptions) Check(u transport.URI) conf.Problems {
	var ps conf.Problems
	if want := transport.SendPortWant(u); want != "" {
		ps.Add("", nil, "%s", want)
	}
	if o.Connections < 0 || o.Connections > 1024 {
		ps.Add("connections", o.Connections, "want 0 (default) .. 1024 TCP connections")
	}
	switch {
	case o.StreamVersion < 0 || o.StreamVersion > StreamVersion2:
		ps.Add("stream_version", o.StreamVersion, "want %d or %d (0: %d)", StreamVersion1, StreamVersion2, StreamVersion2)
	case o.StreamVersion != 0 && u.Option("framing") == FramingFEROL:
		ps.Add("stream_version", o.StreamVersion, "a FEROL stream (?framing=ferol) has no stream version")
	}
	return ps
}

// Sender sends packets over several connections, each source's always on
// the same one (so a source's packets stay in order).
type Sender struct {
	conns []*Stream
}

// NewSender opens o.Connections streams of version o.StreamVersion to
// addr (0: min(sources, 4) streams of version 2), each with an SO_SNDBUF
// of o.SocketBuffer bytes (0: the system's). Errors: those of DialVersion,
// naming which of the connections failed.
func NewSender(ctx context.Context, addr string, o SenderOptions, sources int) (*Sender, error) {
	k := o.Connections
	if k <= 0 {
		k = max(min(sources, 4), 1)
	}
	version := o.StreamVersion
	if version == 0 {
		version = StreamVersion2
	}
	s := &Sender{}
	for i := range k {
		c, err := DialVersion(ctx, addr, int(o.SocketBuffer), version)
		if err != nil {
			for _, c := range s.conns {
				c.conn.Close()
			}
			if ctx.Err() != nil {
				return nil, err
			}
			return nil, fmt.Errorf("%w (connection %d of %d)", err, i+1, k)
		}
		s.conns = append(s.conns, c)
	}
	return s, nil
}

func (s *Sender) conn(p transport.Packet) *Stream { return s.conns[int(p.Source)%len(s.conns)] }

// Send sends p on its source's connection (see Stream.Send). When that
// connection has to wait for credit, every connection's buffered frames go
// out first: the receiver releases credit only for events it can build, and
// an event's fragments of the other sources, left in their connections'
// buffers while this one waits, would wait with it until the builder timed
// the events out (1000 connections, one source each: every event built
// with the first connection's source alone and the others' late).
func (s *Sender) Send(ctx context.Context, p transport.Packet) error {
	c := s.conn(p)
	if c.avail.Load() < int64(len(p.Bytes)) && len(s.conns) > 1 {
		if err := s.Flush(); err != nil {
			return err
		}
	}
	return c.Send(ctx, p.Bytes)
}

// SendTruncated cuts p on its source's connection, which then reconnects
// (see Stream.SendTruncated).
func (s *Sender) SendTruncated(ctx context.Context, p transport.Packet, cut int) error {
	return s.conn(p).SendTruncated(ctx, p.Bytes, cut)
}

// Flush writes out what every connection buffered.
func (s *Sender) Flush() error {
	for _, c := range s.conns {
		if err := c.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// Close ends every connection's stream cleanly and waits until the
// receiver read them all; it returns the first error.
func (s *Sender) Close(ctx context.Context, _ uint64) error {
	var first error
	for _, c := range s.conns {
		if err := c.Close(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Stats sums the connections' throttling, reconnections and resent
// packets.
func (s *Sender) Stats() transport.SenderStats {
	var st transport.SenderStats
	for _, c := range s.conns {
		st.ThrottleNs += c.ThrottleNs()
		st.Reconnects += c.Reconnects()
		st.Resent += c.Resent()
	}
	return st
}
