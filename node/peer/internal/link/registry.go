package link

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sluice-daq/sluice/node/peer"
)

// Registry is what both transports keep of their Conns: the live ones (for
// heartbeats and Close), counted as open, and the accept queue of those
// that passed the hello, whose places are reserved during the hello so that
// a full queue refuses the peer instead of blocking.
type Registry[C comparable] struct {
	ctr    *Counters
	accept chan C
	limit  int64
	queued atomic.Int64 // places reserved or taken in accept
	closed chan struct{}

	mu       sync.Mutex
	conns    map[C]struct{}
	isClosed bool
}

// NewRegistry makes a registry whose accept queue holds acceptQueue Conns.
func NewRegistry[C comparable](acceptQueue int, ctr *Counters) *Registry[C] {
	return &Registry[C]{ctr: ctr, accept: make(chan C, acceptQueue), limit: int64(acceptQueue),
		closed: make(chan struct{}), conns: map[C]struct{}{}}
}

// Add records c as live and open, and runs started (if not nil) before
// Close can see c (e.g. counting c's goroutines in the WaitGroup that the
// transport's Close waits on); false once the registry is closed.
func (r *Registry[C]) Add(c C, started func()) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.isClosed {
		return false
	}
	r.conns[c] = struct{}{}
	r.ctr.Open.Add(1)
	if started != nil {
		started()
	}
	return true
}

// Remove forgets c (its link's OnEnd).
func (r *Registry[C]) Remove(c C) {
	r.mu.Lock()
	_, ok := r.conns[c]
	delete(r.conns, c)
	r.mu.Unlock()
	if ok {
		r.ctr.Open.Add(-1)
	}
}

// Conns appends the live Conns to buf.
func (r *Registry[C]) Conns(buf []C) []C {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.conns {
		buf = append(buf, c)
	}
	return buf
}

// Close closes the registry (Add fails, Accept returns ErrClosed) and
// returns the Conns still live, for the transport to close. Call once.
func (r *Registry[C]) Close() []C {
	r.mu.Lock()
	r.isClosed = true
	r.mu.Unlock()
	close(r.closed)
	return r.Conns(nil)
}

// Closed is closed by Close.
func (r *Registry[C]) Closed() <-chan struct{} { return r.closed }

// Reservation is a hello's hold on a place in the accept queue: Reserve
// and Unreserve for handshake.Accept, Push once the Conn is established.
type Reservation[C comparable] struct {
	r        *Registry[C]
	reserved bool
}

// Reservation starts one hello's reservation.
func (r *Registry[C]) Reservation() *Reservation[C] { return &Reservation[C]{r: r} }

// Reserve takes a place; false when the queue is full.
func (v *Reservation[C]) Reserve() bool {
	if v.r.queued.Add(1) > v.r.limit {
		v.r.queued.Add(-1)
		return false
	}
	v.reserved = true
	return true
}

// Unreserve gives the place back, if one was taken.
func (v *Reservation[C]) Unreserve() {
	if v.reserved {
		v.r.queued.Add(-1)
		v.reserved = false
	}
}

// Push queues c for Accept in the reserved place (never blocks) and counts
// it accepted.
func (v *Reservation[C]) Push(c C) {
	v.reserved = false
	v.r.ctr.Accepted.Add(1)
	v.r.accept <- c
}

// Accept returns the next Conn that passed the hello.
func (r *Registry[C]) Accept(ctx context.Context, addr string) (C, error) {
	var zero C
	select {
	case c := <-r.accept:
		r.queued.Add(-1)
		return c, nil
	case <-r.closed:
		return zero, fmt.Errorf("%w: transport %s", peer.ErrClosed, addr)
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}
