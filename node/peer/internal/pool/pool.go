// Package pool is the receive pool of a peer transport: one mmap'd arena
// (registered once with the transport, e.g. ucp_mem_map) from which data
// messages get slots of exactly their size, rounded up to a page. Slots are
// freed in any order and coalesce with their free neighbours; a message that
// does not fit waits, first come first served, so the pool's size bounds the
// memory the transport ever holds for received data.
package pool

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/sluice-daq/sluice/node/peer"
)

// Align is a slot's alignment and size granule (a page).
const Align = 4096

// extent is a free range of the arena [off, off+n).
type extent struct{ off, n int }

// Pool is a receive pool. Its methods are safe for concurrent use.
type Pool struct {
	mem []byte

	mu      sync.Mutex
	free    []extent // sorted by off, never adjacent (coalesced)
	waiters []*waiter
	closed  bool
	held    atomic.Int64 // bytes in taken slots (rounded sizes)
	waits   atomic.Uint64
	onFree  func()
	onLast  func()
	lastRan bool
}

type waiter struct {
	size  int
	ready chan int // receives the slot's offset
}

// New maps an arena of size bytes (rounded down to Align; at least one
// maxSlot) for slots of at most maxSlot bytes. onFree, if not nil, runs
// after every release (outside the pool's lock; it must not block). onLast,
// if not nil, runs once when the pool is closed and its last slot released,
// just before the arena is unmapped (a transport deregisters it there).
func New(size int64, maxSlot int, onFree, onLast func()) (*Pool, error) {
	size -= size % Align
	if size < int64(roundUp(maxSlot)) || size <= 0 {
		return nil, fmt.Errorf("%w: pool of %d bytes cannot hold a %d-byte slot", peer.ErrConfig, size, maxSlot)
	}
	mem, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("peer: receive pool of %d bytes: mmap: %w", size, err)
	}
	return &Pool{mem: mem, free: []extent{{0, int(size)}}, onFree: onFree, onLast: onLast}, nil
}

// Mem is the whole arena (to register it, or to check that a buffer lies
// inside it).
func (p *Pool) Mem() []byte { return p.mem }

// Held is the bytes of the slots now taken (sizes rounded up to Align).
func (p *Pool) Held() int64 { return p.held.Load() }

// Waits counts Get calls that had to wait for room.
func (p *Pool) Waits() uint64 { return p.waits.Load() }

func roundUp(n int) int { return (max(n, 1) + Align - 1) &^ (Align - 1) }

// ErrClosed: the pool was closed.
var ErrClosed = errors.New("peer: receive pool closed")

// TryGet returns a slot of n bytes (0 <= n <= the arena) at once, or nil
// when there is no room now or others wait before it (FIFO).
func (p *Pool) TryGet(n int) *Slot {
	size := roundUp(n)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.waiters) > 0 {
		return nil
	}
	off, ok := p.alloc(size)
	if !ok {
		return nil
	}
	return p.slot(off, n, size)
}

// Get returns a slot of n bytes, waiting (behind earlier waiters) until
// there is room, ctx ends (its error) or the pool closes (ErrClosed).
func (p *Pool) Get(ctx context.Context, n int) (*Slot, error) {
	size := roundUp(n)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if size > len(p.mem) {
		p.mu.Unlock()
		return nil, fmt.Errorf("%w: %d-byte slot in a %d-byte pool", peer.ErrTooLarge, n, len(p.mem))
	}
	if len(p.waiters) == 0 {
		if off, ok := p.alloc(size); ok {
			p.mu.Unlock()
			return p.slot(off, n, size), nil
		}
	}
	w := &waiter{size: size, ready: make(chan int, 1)}
	p.waiters = append(p.waiters, w)
	p.waits.Add(1)
	p.mu.Unlock()
	select {
	case off := <-w.ready:
		if off < 0 {
			return nil, ErrClosed
		}
		return p.slot(off, n, size), nil
	case <-ctx.Done():
		p.mu.Lock()
		for i, x := range p.waiters {
			if x == w {
				p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
				p.mu.Unlock()
				return nil, ctx.Err()
			}
		}
		p.mu.Unlock()
		// Granted (or closed) meanwhile: give the grant back.
		if off := <-w.ready; off >= 0 {
			p.slot(off, n, size).Release()
		}
		return nil, ctx.Err()
	}
}

func (p *Pool) slot(off, n, size int) *Slot {
	return &Slot{p: p, off: off, n: n, size: size}
}

// alloc takes size bytes first-fit and counts them held. Caller holds mu.
func (p *Pool) alloc(size int) (int, bool) {
	for i, e := range p.free {
		if e.n >= size {
			p.held.Add(int64(size))
			if e.n == size {
				p.free = append(p.free[:i], p.free[i+1:]...)
			} else {
				p.free[i] = extent{e.off + size, e.n - size}
			}
			return e.off, true
		}
	}
	return 0, false
}

// release returns [off, off+size), coalescing, then serves waiters in
// order while the first fits.
func (p *Pool) release(off, size int) {
	p.mu.Lock()
	i := sort.Search(len(p.free), func(i int) bool { return p.free[i].off > off })
	e := extent{off, size}
	mergePrev := i > 0 && p.free[i-1].off+p.free[i-1].n == off
	mergeNext := i < len(p.free) && off+size == p.free[i].off
	switch {
	case mergePrev && mergeNext:
		p.free[i-1].n += size + p.free[i].n
		p.free = append(p.free[:i], p.free[i+1:]...)
	case mergePrev:
		p.free[i-1].n += size
	case mergeNext:
		p.free[i] = extent{off, size + p.free[i].n}
	default:
		p.free = append(p.free, extent{})
		copy(p.free[i+1:], p.free[i:])
		p.free[i] = e
	}
	rem := p.held.Add(-int64(size))
	for len(p.waiters) > 0 {
		w := p.waiters[0]
		o, ok := p.alloc(w.size)
		if !ok {
			break
		}
		p.waiters = p.waiters[1:]
		w.ready <- o
	}
	last := p.closed && rem == 0 && !p.lastRan
	if last {
		p.lastRan = true
	}
	p.mu.Unlock()
	if p.onFree != nil {
		p.onFree()
	}
	if last {
		p.finish()
	}
}

// Close refuses further slots (waiters get ErrClosed) and unmaps the arena
// once every taken slot is released (at once if none is). Idempotent.
func (p *Pool) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	for _, w := range p.waiters {
		w.ready <- -1
	}
	p.waiters = nil
	last := p.held.Load() == 0 && !p.lastRan
	if last {
		p.lastRan = true
	}
	p.mu.Unlock()
	if last {
		p.finish()
	}
}

// Unmapped reports whether the arena is gone (closed and all released).
func (p *Pool) Unmapped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastRan
}

func (p *Pool) finish() {
	if p.onLast != nil {
		p.onLast()
	}
	unix.Munmap(p.mem)
}

// Slot is a taken part of the arena; as a peer.Buffer it is handed to the
// receiver of a data message.
type Slot struct {
	p            *Pool
	off, n, size int
	released     atomic.Bool
}

var _ peer.Buffer = (*Slot)(nil)

// Bytes is the slot's n bytes, at their place in the arena.
func (s *Slot) Bytes() []byte { return s.p.mem[s.off : s.off+s.n : s.off+s.n] }

// Offset is the slot's offset in the arena.
func (s *Slot) Offset() int { return s.off }

// Release frees the slot; a second call panics.
func (s *Slot) Release() {
	if !s.released.CompareAndSwap(false, true) {
		panic("peer: Buffer released twice")
	}
	s.p.release(s.off, s.size)
}
