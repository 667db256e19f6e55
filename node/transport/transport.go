package transport

import (
	"context"
	"log/slog"

	"github.com/sluice-daq/sluice/schemas"
)

// Sink receives the packets of an input. *builder.Builder satisfies it.
// The packet's bytes stay valid until the sink calls release, exactly once,
// also when AddPacket returns an error; ring space and TCP credits are
// returned only then.
type Sink interface {
	AddPacket(ctx context.Context, p schemas.MFP, release func()) error
}

// Relieving is a Sink that can hand back, on request, the packets it holds
// for events that are complete but wait in a partial batch (the builder's
// batch_events / batch_latency): an input whose buffer (a readout ring) is
// held by the sink while it has nothing new to read calls Relieve, so that
// its writer is not held up until the batch's latency ends. Relieve
// reports whether held packets are on their way back (false: every packet
// held belongs to an event still open, which only its missing fragments
// or its timeout complete). Safe for concurrent use; it does not block.
type Relieving interface {
	Relieve() bool
}

// Input is the receiving end of a transport: a ring, a listening socket, a
// file.
type Input interface {
	// Run hands every packet to sink until the input ends (ring closed by
	// its writer, end of file, the expected streams ended) or ctx is
	// cancelled; both return nil. It returns the sink's error, or an error
	// that makes the input unusable (e.g. a ring writer that died).
	Run(ctx context.Context, sink Sink) error
	// Stats is a consistent-enough snapshot of the counters, safe to call
	// while Run runs.
	Stats() Stats
	// Close releases what opening the input took (a listening socket) when
	// Run never ran or has returned; Run releases it itself when it
	// returns. Idempotent.
	Close() error
}

// Listener is an Input that listens at a network address (tcp, udp, peer):
// the node logs the address and shows it in /status, so that an input
// configured with port 0 tells which port the kernel chose.
type Listener interface {
	// ListenAddr is the bound address, host:port.
	ListenAddr() string
}

// Logged is an Input that reports what it survives (a failed accept, a
// refused connection) in the node's log: the node gives it its logger,
// which limits repeated records, before Run.
type Logged interface {
	SetLogger(*slog.Logger)
}

// PacketLimited is an Input that allocates each packet at the size its
// data claims (a file's packet headers): the node gives it, before Run,
// the largest packet its memory budget lets it hold (the builder's share,
// which holds the packets handed to it), and the input refuses a larger
// claim with an error instead of allocating it.
type PacketLimited interface {
	LimitPacket(bytes int64)
}

// Sender is the sending end of a transport: what a readout board does, and
// what the emulator (package emulator) runs. Not safe for concurrent use.
type Sender interface {
	// Send sends one packet, waiting for ring space or credit first (the
	// wait is counted in SenderStats.ThrottleNs). Errors wrap
	// ErrPacketTooLarge when p cannot be carried at all.
	Send(ctx context.Context, p Packet) error
	// SendTruncated is fault injection: it sends only the first cut bytes
	// of p as a board that reset mid-packet would (TCP: then drops the
	// connection and reconnects). Errors wrap ErrNoTruncation when the
	// transport cannot carry a cut packet (a file: it would break the
	// framing of every later packet).
	SendTruncated(ctx context.Context, p Packet, cut int) error
	// Flush hands on what Send buffered; called before the sender idles,
	// so that nothing sent waits in a buffer or for a coalesced wake-up.
	Flush() error
	// Close ends the stream cleanly, seqs being the sequence numbers used
	// (one per packet generated, dropped ones included), and waits until
	// the receiver has everything, or ctx ends.
	Close(ctx context.Context, seqs uint64) error
	// Stats are the sending side's counters, final once Close returned.
	Stats() SenderStats
}

// Packet is one packet for a Sender.
type Packet struct {
	// Bytes is one MFP, or one VDIF frame when the URI's Payload is
	// PayloadVDIF, or the FEROL blocks of one FED fragment when it is
	// PayloadFEROL. The sender does not keep it after Send returns.
	Bytes []byte
	// Source is the packet's source: a sender with several connections
	// gives each source one of them, so its packets stay in order.
	Source uint32
	// Seq is the packet's sequence number, one per packet generated (so a
	// dropped packet leaves a gap); transports that number datagrams send
	// it.
	Seq uint64
	// Placed, when not nil, marks a packet replayed from a sample (a
	// recorded file in a loop) whose bytes past its first Placed.Header
	// are the same at every send: a readout ring that still holds them
	// from one lap before writes only the header, as a board's DMA costs
	// the node's cores nothing (package shm). Senders of other transports
	// send Bytes whole and leave it alone.
	Placed *Placement
}

// Placement is what the caller keeps with one replayed packet between its
// sends (Packet.Placed), for the one sender it sends it with.
type Placement struct {
	// Header is how many leading bytes of the packet may differ between
	// two sends (its event id); the rest never does. Set by the caller.
	Header int
	// PassStart marks the first packet of a pass over the sample: a ring
	// sender starts it on a new lap of the ring when the pass before
	// fitted in one lap, so that every packet of the next pass lands
	// where it was (the rest of the lap is a skip record). Set by the
	// caller.
	PassStart bool
	// At and Len are where and how long the sender last wrote it (At is
	// the ring's free-running write position plus one; 0: never). Set by
	// the sender.
	At  uint64
	Len int
}

// SenderStats are a sender's counters.
type SenderStats struct {
	ThrottleNs uint64 // time spent waiting for ring space or credit
	// PlacedBytes (shared memory) are the packet bytes of replayed
	// packets the ring held from a lap before, not written again
	// (Packet.Placed): what a board's DMA would have moved.
	PlacedBytes uint64
	Reconnects  int // TCP: connections made after the first, truncations included
	Resent      int // TCP: packets sent again after their connection failed
	Refused     int // UDP: datagrams refused because nothing listened
	// SequenceNumbers (UDP) are the numbers the stream used, once closed.
	SequenceNumbers uint64
}

// Payload is what one packet of a transport carries.
type Payload uint8

const (
	PayloadMFP   Payload = iota // one multi-fragment packet (package schemas)
	PayloadVDIF                 // one VDIF frame (UDP with ?format=vtp: VTP)
	PayloadFEROL                // the FEROL blocks of one FED fragment (TCP with ?framing=ferol)
)

func (p Payload) String() string {
	switch p {
	case PayloadVDIF:
		return "vdif"
	case PayloadFEROL:
		return "ferol"
	}
	return "mfp"
}
