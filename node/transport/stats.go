package transport

import (
	"context"
	"errors"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/sluice-daq/sluice/schemas"
)

// Reason is why an input did not hand a received packet to its sink. Its
// String is the metric label and the key operators read in ledgers.
type Reason uint8

const (
	Truncated             Reason = iota // the MFP ends before its packet_size
	Malformed                           // any other MFP decode error
	TruncatedAtDisconnect               // TCP: connection closed mid-packet
	Late                                // UDP: arrived after its sequence number was declared lost
	Duplicate                           // UDP: a sequence number already received
	Protocol                            // TCP: frame larger than the credit window, bad preamble
	numReasons
)

var reasonNames = [numReasons]string{"truncated", "malformed", "truncated_at_disconnect", "late", "duplicate", "protocol"}

func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// Reasons lists every Reason, in order.
func Reasons() []Reason {
	out := make([]Reason, numReasons)
	for i := range out {
		out[i] = Reason(i)
	}
	return out
}

// Stats are an input's counters, ready to be exported as metrics.
type Stats struct {
	Packets   uint64 // packets handed to the sink
	Fragments uint64 // their fragments
	Bytes     uint64 // their bytes (whole MFPs; a FEROL stream's blocks as received)
	// Discarded counts received packets not handed on, by reason; reasons
	// that did not occur are absent.
	Discarded map[Reason]uint64
	// Lost counts UDP sequence numbers declared missing (window passed them).
	Lost uint64
	// SinkWaitNs is the wall-clock time, in nanoseconds (microsecond
	// resolution), during which at least one of the input's readers was
	// inside Sink.AddPacket (backpressure): the union over its connections,
	// not their sum, so it never exceeds the time the input has run. A wait
	// going on is included.
	SinkWaitNs uint64
	// HeldBytes are bytes handed to the sink and not yet released: the
	// ring's records; the whole receive buffers of UDP and file inputs
	// (their size rounded up to a power of two, what the memory holds);
	// TCP's packet bytes, as its credit counts them.
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
	// StreamsLost: peer, senders whose connection ended without a
	// complete goodbye (the process died, fell silent, broke the
	// protocol, or its connection ended before the data it counted
	// arrived), by reason ("reset", "heartbeat", "protocol"); absent when
	// none. What such a sender had in flight is in no other counter.
	StreamsLost map[string]uint64
	// ConnectionsByVersion: TCP, streams accepted by the readout stream
	// version their preamble declared (1, 2); absent when none (a FEROL
	// stream has no version).
	ConnectionsByVersion map[int]uint64
	// ExpectStreams: TCP/UDP/peer, the streams the input waits for before
	// it ends (its expect_streams; 0: it never ends by itself).
	ExpectStreams int
	// AcceptErrors: TCP, accept(2) failures the input backed off from and
	// survived, by reason ("emfile": out of file descriptors, "enfile",
	// "enobufs", "enomem", "econnaborted", "other"); absent when none.
	AcceptErrors map[string]uint64
	// Refused counts connections refused, by reason: TCP,
	// "max_connections" (closed at once because its max_connections were
	// open; present from the start, at 0 until one is); peer, hellos
	// refused (the peer package's reasons: "farm", "token", "version",
	// "node", "accept_queue", "malformed"), absent when none.
	Refused map[string]uint64
	// Closed: TCP, every connection the input accepted and that closed
	// since, by reason (the tcp package's Closed* constants:
	// "preamble_timeout", "bad_preamble", "peer_closed", ...).
	Closed map[string]uint64
	// Flagged counts fragments handed on flagged schemas.FlagSourceError
	// by the input itself, by reason (TCP ?framing=ferol: "fed_crc" a FED
	// CRC-16 that does not match, "fed_error_bits" the trailer's R or F
	// bit, "fed_header_mismatch" a FED header naming another FED or event
	// than its FEROL header); absent when none. The builder marks their
	// events (StatusSourceError).
	Flagged map[string]uint64
}

// DiscardTotal sums Discarded.
func (s Stats) DiscardTotal() uint64 {
	var n uint64
	for _, v := range s.Discarded {
		n += v
	}
	return n
}

// Counters are the atomics behind Stats that every input keeps; the zero
// value is ready. An input counts with them and reports Snapshot (plus its
// own fields) as its Stats.
type Counters struct {
	packets, fragments, bytes, lost atomic.Uint64
	sinkWait                        waitClock
	connections, streams            atomic.Uint64
	held, open                      atomic.Int64
	discarded                       [numReasons]atomic.Uint64

	mu           sync.Mutex
	acceptErrors map[string]uint64 // rare: a map under a lock
	flagged      map[string]uint64 // as rare
	streamsLost  map[string]uint64
	closed       map[string]uint64
	refused      map[string]uint64
}

// Snapshot returns the counters as Stats.
func (c *Counters) Snapshot() Stats {
	s := Stats{
		Packets: c.packets.Load(), Fragments: c.fragments.Load(), Bytes: c.bytes.Load(),
		Lost: c.lost.Load(), SinkWaitNs: c.sinkWait.total() * 1000, HeldBytes: c.held.Load(),
		Connections: c.connections.Load(), Streams: c.streams.Load(), Open: c.open.Load(),
		Discarded: make(map[Reason]uint64, numReasons),
	}
	for i := range c.discarded {
		if v := c.discarded[i].Load(); v > 0 {
			s.Discarded[Reason(i)] = v
		}
	}
	c.mu.Lock()
	if len(c.acceptErrors) > 0 {
		s.AcceptErrors = maps.Clone(c.acceptErrors)
	}
	if len(c.flagged) > 0 {
		s.Flagged = maps.Clone(c.flagged)
	}
	if len(c.streamsLost) > 0 {
		s.StreamsLost = maps.Clone(c.streamsLost)
	}
	if len(c.closed) > 0 {
		s.Closed = maps.Clone(c.closed)
	}
	if len(c.refused) > 0 {
		s.Refused = maps.Clone(c.refused)
	}
	c.mu.Unlock()
	return s
}

// AcceptError counts one failed accept(2) by reason.
func (c *Counters) AcceptError(reason string) {
	c.count(&c.acceptErrors, reason)
}

// Refuse counts one connection refused, for reason (Stats.Refused).
func (c *Counters) Refuse(reason string) {
	c.count(&c.refused, reason)
}

// Close counts one connection that closed, for reason (Stats.Closed).
func (c *Counters) Close(reason string) {
	c.count(&c.closed, reason)
}

// Flag counts one fragment handed on flagged, for reason (Stats.Flagged).
func (c *Counters) Flag(reason string) {
	c.count(&c.flagged, reason)
}

// StreamLost counts one sender lost without a complete goodbye, by reason.
func (c *Counters) StreamLost(reason string) {
	c.count(&c.streamsLost, reason)
}

// count adds one to (*m)[reason], making the map on first use: the
// by-reason counters are absent until something happens to count.
func (c *Counters) count(m *map[string]uint64, reason string) {
	c.mu.Lock()
	if *m == nil {
		*m = map[string]uint64{}
	}
	(*m)[reason]++
	c.mu.Unlock()
}

// Discard counts one received packet not handed on, for reason r.
func (c *Counters) Discard(r Reason) { c.discarded[r].Add(1) }

// Lose counts n sequence numbers declared missing.
func (c *Counters) Lose(n uint64) { c.lost.Add(n) }

// Hold adds n (negative: releases) to the bytes the sink holds.
func (c *Counters) Hold(n int64) { c.held.Add(n) }

// Connected counts one connection accepted and open; Disconnected the end
// of an open one; StreamEnded a stream that ended cleanly.
func (c *Counters) Connected()     { c.connections.Add(1) }
func (c *Counters) Opened(d int64) { c.open.Add(d) }
func (c *Counters) StreamEnded()   { c.streams.Add(1) }

// Deliver decodes rec (exactly one MFP) and hands it to sink; a packet that
// does not decode is counted (Truncated or Malformed) and released here.
// release must be safe to call exactly once.
func (c *Counters) Deliver(ctx context.Context, sink Sink, rec []byte, release func()) error {
	p, n, err := schemas.DecodeMFP(rec)
	if err == nil && n != len(rec) {
		err = schemas.Errorf("mfp", "packet", int64(n), schemas.ErrInconsistent, "%d bytes after a packet of %d", len(rec)-n, n)
	}
	if err != nil {
		c.DiscardDecodeError(err)
		release()
		return nil
	}
	return c.Hand(ctx, sink, p, release)
}

// DiscardDecodeError counts a packet that did not decode: Truncated when
// err wraps schemas.ErrTruncated, Malformed otherwise.
func (c *Counters) DiscardDecodeError(err error) {
	if errors.Is(err, schemas.ErrTruncated) {
		c.Discard(Truncated)
	} else {
		c.Discard(Malformed)
	}
}

// Hand gives a decoded packet to the sink, counting it and the time the
// sink held the input up (see Stats.SinkWaitNs). (Held bytes are counted by each input's release,
// which needs no extra closure per packet.)
func (c *Counters) Hand(ctx context.Context, sink Sink, p schemas.MFP, release func()) error {
	return c.HandWire(ctx, sink, p, release, len(p.Bytes()))
}

// HandWire is Hand for a packet the input made from wire bytes of another
// framing (a FEROL stream's blocks): Stats.Bytes counts those, as they
// arrived.
func (c *Counters) HandWire(ctx context.Context, sink Sink, p schemas.MFP, release func(), wire int) error {
	c.sinkWait.enter(clockUs())
	err := sink.AddPacket(ctx, p, release)
	c.sinkWait.leave(clockUs())
	if err != nil {
		return err
	}
	c.packets.Add(1)
	c.fragments.Add(uint64(p.N))
	c.bytes.Add(uint64(wire))
	return nil
}
