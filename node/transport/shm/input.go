package shm

import (
	"context"
	"io"
	"log/slog"
	"sync"

	"github.com/sluice-daq/sluice/node/transport"
)

// Input reads a shared-memory readout ring (shm://NAME).
type Input struct {
	name string
	cfg  ReaderConfig
	c    transport.Counters
	log  *slog.Logger // nil: none
	// warned: the ring was found full of packets held for open events
	// (logged once per Run).
	warned bool

	mu       sync.Mutex
	r        *Reader // while attached
	throttle uint64  // the writer's throttle when the reader detached
}

// NewInput returns the input for ring name; Run attaches to it.
func NewInput(name string, cfg ReaderConfig) *Input {
	return &Input{name: name, cfg: cfg}
}

// SetLogger gives the input the node's logger (transport.Logged).
func (in *Input) SetLogger(l *slog.Logger) { in.log = l }

// Run waits for the ring to exist, attaches as its reader and hands every
// packet to sink zero-copy; ring space is acknowledged as the sink releases
// packets. A sink that is transport.Relieving is asked to hand back what it
// holds whenever the reader has caught up with the writer while the ring is
// about full of unacknowledged packets: a ring smaller than the builder's batch
// would otherwise hold the writer up for each batch's whole latency. It returns nil when the writer closed the ring and every packet
// has been read, or when ctx ends; ErrWriterDead when the writer died. The
// ring stays mapped until the sink released every packet it holds.
func (in *Input) Run(ctx context.Context, sink transport.Sink) error {
	r, err := WaitReader(ctx, in.name, in.cfg)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	in.mu.Lock()
	in.r = r
	in.mu.Unlock()
	defer func() {
		in.mu.Lock()
		in.throttle = r.WriterThrottleNs()
		in.r = nil
		in.mu.Unlock()
		r.Close()
	}()
	if relief, ok := sink.(transport.Relieving); ok {
		r.held = func(held, size uint64) { in.relieve(held, size, relief) }
	}
	for {
		p, release, err := r.Next(ctx)
		if err == io.EOF || ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if err := in.c.Deliver(ctx, sink, p, release); err != nil {
			return err
		}
	}
}

// relieve asks the sink to hand back ring space: the reader has read
// everything written and the ring is about full (Reader.held). The sink
// closes its open batch early when events in it hold packets (counted in
// batches_relieved). When it holds nothing it can hand back (every held
// packet is in an event still open) and the writer has no room left, it
// logs that once: the writer waits until more of those events complete,
// or until the builder's timeout when the ring cannot hold all of them.
func (in *Input) relieve(held, size uint64, sink transport.Relieving) {
	if !sink.Relieve() && held+coalesce(size) > size && !in.warned && in.log != nil {
		in.warned = true
		in.log.Warn("readout ring full of packets of events still open, none built to hand back: the writer waits until they complete (or reach the builder's timeout if the ring holds fewer bytes than the events in flight at once); batches closed early to free the ring are counted in batches_relieved; a larger ring avoids the wait",
			"ring", in.name, "ring_bytes", size, "held_bytes", held)
	}
}

// Stats returns the counters; WriterThrottleNs and HeldBytes come from the
// ring.
func (in *Input) Stats() transport.Stats {
	s := in.c.Snapshot()
	in.mu.Lock()
	defer in.mu.Unlock()
	s.WriterThrottleNs = in.throttle
	if in.r != nil {
		s.WriterThrottleNs = in.r.WriterThrottleNs()
		s.HeldBytes = in.r.heldBytes()
	}
	return s
}

// Close does nothing: the ring is attached only while Run runs, and Run
// detaches when it returns.
func (in *Input) Close() error { return nil }
