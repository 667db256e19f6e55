package udp

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/node/transport/internal/rxbuf"
	"github.com/sluice-daq/sluice/schemas"
)

// Transport registers udp://HOST:PORT[?format=mfp|vtp] (see package all).
var Transport = transport.Transport{
	Scheme: "udp",
	Target: "HOST:PORT",
	About:  "a UDP input (8-byte sequence number + MFP; ?format=vtp: + VDIF frame)",
	Query:  []string{"format"},
	CheckTarget: func(u transport.URI) error {
		if err := transport.CheckHostPort(u); err != nil {
			return err
		}
		if f := u.Option("format"); f != "" && f != FormatMFP && f != FormatVTP {
			return fmt.Errorf("format %q: want %s or %s", f, FormatMFP, FormatVTP)
		}
		return nil
	},
	Payload: func(u transport.URI) transport.Payload {
		if u.Option("format") == FormatVTP {
			return transport.PayloadVDIF
		}
		return transport.PayloadMFP
	},
	Embeddable:      true,
	NewInputOptions: func() transport.InputOptions { o := DefaultOptions(); return &o },
	OpenInput: func(u transport.URI, o transport.InputOptions) (transport.Input, error) {
		opts := *o.(*Options)
		opts.Format = u.Option("format")
		return Listen(u.Target, opts)
	},
	NewSenderOptions: func() transport.SenderOptions { return &SenderOptions{SocketBuffer: DefaultSendBuffer} },
	OpenSender: func(_ context.Context, u transport.URI, o transport.SenderOptions, _ int) (transport.Sender, error) {
		if err := transport.CheckSendPort(u); err != nil {
			return nil, err
		}
		s, err := Dial(u.Target, int(o.(*SenderOptions).SocketBuffer))
		if err != nil {
			return nil, err
		}
		return &Sender{s: s}, nil
	},
}

// Datagram payload formats, the URI's ?format=.
const (
	FormatMFP = "mfp" // one MFP per datagram (the default)
	FormatVTP = "vtp" // one VDIF frame per datagram: VTP
)

// Defaults of Options and SenderOptions.
const (
	DefaultReorderWindow = 256
	DefaultLatencyBudget = 20 * time.Millisecond
	DefaultSocketBuffer  = 8 << 20
	DefaultSendBuffer    = 4 << 20
)

// Options are a UDP input's settings; zero values take the defaults.
type Options struct {
	// ReorderWindow (datagrams, default 256) and LatencyBudget (default
	// 20 ms): a missing sequence number is declared lost when a datagram
	// ReorderWindow past it arrives or when the datagram after it has
	// waited LatencyBudget.
	ReorderWindow int           `yaml:"reorder_window" doc:"datagrams past a gap before it counts as lost"`
	LatencyBudget time.Duration `yaml:"latency_budget" doc:"or this long waited for the missing datagram"`
	// SocketBuffer is the SO_RCVBUF requested (default 8 MiB; the size
	// granted is in Stats.SocketBufferBytes).
	SocketBuffer conf.ByteSize `yaml:"socket_buffer" doc:"SO_RCVBUF requested"`
	// MaxDatagram is the largest datagram received whole (default and at
	// most 65507, the largest over IPv4): each datagram is read into a
	// buffer of this size plus 32 bytes, rounded up to a power of two, so
	// a smaller bound (e.g. 9000 for jumbo frames) shrinks what the input
	// holds. A longer datagram is cut to it, and its packet then counts as
	// truncated.
	MaxDatagram conf.ByteSize `yaml:"max_datagram" doc:"largest datagram received whole, bytes (its buffers are this size)"`
	// ExpectStreams: when > 0, Run returns nil once this many senders sent
	// their end marker (0: it runs until it is stopped).
	ExpectStreams int `yaml:"expect_streams" doc:"end the input after this many senders finished (0 = never)"`
	// Format is the datagrams' payload, FormatMFP (default) or FormatVTP;
	// written in the URI (?format=), not beside it.
	Format string `yaml:"-"`
}

// DefaultOptions are the settings of an input configured with none.
func DefaultOptions() Options {
	return Options{ReorderWindow: DefaultReorderWindow, LatencyBudget: DefaultLatencyBudget, SocketBuffer: DefaultSocketBuffer, MaxDatagram: MaxDatagram}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.ReorderWindow <= 0 {
		o.ReorderWindow = d.ReorderWindow
	}
	if o.LatencyBudget <= 0 {
		o.LatencyBudget = d.LatencyBudget
	}
	if o.SocketBuffer <= 0 {
		o.SocketBuffer = d.SocketBuffer
	}
	if o.MaxDatagram <= 0 {
		o.MaxDatagram = d.MaxDatagram
	}
	return o
}

// bufferBytes is the size of each receive buffer.
func (o Options) bufferBytes() int { return rxbuf.ClassSize(udpHeadroom + int(o.MaxDatagram)) }

// MemoryBytes is what the input holds itself at most: its receive buffers
// (one per datagram of a recvmmsg batch) and the datagrams its reorder
// windows hold back, ReorderWindow per expected stream (at least one),
// each in a buffer of MaxDatagram + 32 bytes rounded up to a power of two.
// Datagrams handed to the builder are the builder's share (HeldBytes
// counts their whole buffers); the kernel's socket buffer is kernel memory.
func (o *Options) MemoryBytes() int64 {
	d := o.withDefaults()
	return int64(recvBatch+d.ReorderWindow*max(1, d.ExpectStreams)) * int64(d.bufferBytes())
}

// SharedMemory: receive buffers are on the Go heap.
func (*Options) SharedMemory() bool { return false }

// Check wants a reorder window of 1 to 65536 datagrams, a positive latency
// budget, a socket buffer of at most 1 GiB, a largest datagram of 40 to
// 65507 bytes and a number of streams >= 0.
func (o *Options) Check(transport.URI) conf.Problems {
	var ps conf.Problems
	if o.ReorderWindow < 1 || o.ReorderWindow > 1<<16 {
		ps.Add("reorder_window", o.ReorderWindow, "want 1..65536 datagrams")
	}
	if o.LatencyBudget <= 0 {
		ps.Add("latency_budget", o.LatencyBudget, "want a positive duration such as 20ms")
	}
	if o.SocketBuffer > 1<<30 {
		ps.Add("socket_buffer", o.SocketBuffer, "want at most 1GiB")
	}
	if o.MaxDatagram != 0 && (o.MaxDatagram < seqSize+schemas.MFPHeaderSize || o.MaxDatagram > MaxDatagram) {
		ps.Add("max_datagram", o.MaxDatagram, "want %d..%d bytes", seqSize+schemas.MFPHeaderSize, MaxDatagram)
	}
	if o.ExpectStreams < 0 {
		ps.Add("expect_streams", o.ExpectStreams, "want 0, or a number of senders")
	}
	return ps
}

// Ends: the input ends once the expected senders sent their end markers,
// if it was told how many there are.
func (o *Options) Ends() bool { return o.ExpectStreams > 0 }

// SenderOptions are the settings of a UDP sender.
type SenderOptions struct {
	// SocketBuffer is the SO_SNDBUF requested (default 4 MiB; 0: the
	// system's).
	SocketBuffer conf.ByteSize `yaml:"socket_buffer" doc:"SO_SNDBUF requested"`
}

// Check wants a port to send to.
func (*SenderOptions) Check(u transport.URI) conf.Problems {
	var ps conf.Problems
	if want := transport.SendPortWant(u); want != "" {
		ps.Add("", nil, "%s", want)
	}
	return ps
}

// Sender numbers each packet's datagram with the packet's sequence number
// and ends the stream with an end marker.
type Sender struct {
	s     *Stream
	seqs  uint64
	ended bool
}

// Send sends p as one datagram numbered p.Seq.
func (s *Sender) Send(_ context.Context, p transport.Packet) error { return s.s.Send(p.Seq, p.Bytes) }

// SendTruncated sends the first cut bytes of p as its datagram.
func (s *Sender) SendTruncated(_ context.Context, p transport.Packet, cut int) error {
	return s.s.Send(p.Seq, p.Bytes[:cut])
}

// Flush does nothing: every datagram is sent at once.
func (s *Sender) Flush() error { return nil }

// Close sends the end marker (numbers below seqs were used) and closes the
// socket.
func (s *Sender) Close(_ context.Context, seqs uint64) error {
	err := s.s.End(seqs)
	s.seqs, s.ended = seqs, true
	if cerr := s.s.Close(); err == nil {
		err = cerr
	}
	return err
}

// Stats are the datagrams refused and, once closed, the sequence numbers
// used.
func (s *Sender) Stats() transport.SenderStats {
	return transport.SenderStats{Refused: s.s.Refused(), SequenceNumbers: s.seqs}
}
