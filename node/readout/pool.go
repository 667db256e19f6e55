package readout

import (
	"math/bits"
	"sync"
)

// Size classes of pooled receive buffers: powers of two from 4 KiB to 4 GiB.
const (
	minClassShift = 12
	numClasses    = 21
)

// bufPool keeps receive buffers for reuse. Touching fresh memory costs
// ~15 µs per page on these machines (CALIBRATION.md), so once the pool is
// warm the receive path allocates nothing per packet; the credit window
// (TCP) or buffer count (UDP) bounds how much it ever holds.
type bufPool struct {
	mu   sync.Mutex
	free [numClasses][]*rxBuf
	held *counters // HeldBytes accounting
}

// rxBuf is one pooled buffer. Its release func is built once, when the
// buffer is first allocated, so handing it to a sink allocates nothing.
type rxBuf struct {
	b       []byte
	class   int
	n       int       // bytes in use, counted in HeldBytes while handed out
	onFree  func(int) // per-use hook (TCP credit return), may be nil
	pool    *bufPool
	release func()
}

// get returns a buffer of at least n bytes (n <= 4 GiB).
func (p *bufPool) get(n int) *rxBuf {
	c := 0
	if n > 1<<minClassShift {
		c = bits.Len(uint(n-1)) - minClassShift
	}
	p.mu.Lock()
	if l := len(p.free[c]); l > 0 {
		b := p.free[c][l-1]
		p.free[c] = p.free[c][:l-1]
		p.mu.Unlock()
		return b
	}
	p.mu.Unlock()
	b := &rxBuf{b: make([]byte, 1<<(c+minClassShift)), class: c, pool: p}
	b.release = b.put
	return b
}

// hold marks the first n bytes as handed to a sink; release (once) frees
// them and runs onFree(n).
func (b *rxBuf) hold(n int, onFree func(int)) {
	b.n, b.onFree = n, onFree
	b.pool.held.held.Add(int64(n))
}

func (b *rxBuf) put() {
	if b.n > 0 {
		b.pool.held.held.Add(-int64(b.n))
		if b.onFree != nil {
			b.onFree(b.n)
		}
	}
	b.n, b.onFree = 0, nil
	p := b.pool
	p.mu.Lock()
	p.free[b.class] = append(p.free[b.class], b)
	p.mu.Unlock()
}
