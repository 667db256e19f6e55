package shm

import (
	"context"
	"io"
	"sync"

	"github.com/sluice-daq/sluice/node/transport"
)

// Input reads a shared-memory readout ring (shm://NAME).
type Input struct {
	name string
	cfg  ReaderConfig
	c    transport.Counters

	mu       sync.Mutex
	r        *Reader // while attached
	throttle uint64  // the writer's throttle when the reader detached
}

// NewInput returns the input for ring name; Run attaches to it.
func NewInput(name string, cfg ReaderConfig) *Input {
	return &Input{name: name, cfg: cfg}
}

// Run waits for the ring to exist, attaches as its reader and hands every
// packet to sink zero-copy; ring space is acknowledged as the sink releases
// packets. It returns nil when the writer closed the ring and every packet
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
