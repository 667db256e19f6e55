// Package rxbuf is the pool of receive buffers the socket and file inputs
// read into.
package rxbuf

import (
	"math/bits"
	"sync"

	"github.com/sluice-daq/sluice/node/transport"
)

// Size classes of pooled receive buffers: powers of two from 4 KiB to 4 GiB.
const (
	minClassShift = 12
	numClasses    = 21
)

// Pool keeps receive buffers for reuse. Touching fresh memory costs ~15 µs
// per page on the machines sluice was measured on, so once the pool is
// warm the receive path allocates nothing per packet; the credit window
// (TCP) or buffer count (UDP) bounds how much it ever holds. Held is the
// input's counters, which count the bytes handed out (HeldBytes); it must
// be set before the first Get.
type Pool struct {
	Held *transport.Counters

	mu   sync.Mutex
	free [numClasses][]*Buf
}

// Buf is one pooled buffer. Its release func is built once, when the
// buffer is first allocated, so handing it to a sink allocates nothing.
type Buf struct {
	B       []byte
	class   int
	n       int       // bytes in use, counted in HeldBytes while handed out
	onFree  func(int) // per-use hook (TCP credit return), may be nil
	pool    *Pool
	Release func() // Put, as a func value made once
}

// class is the size class of a buffer of at least n bytes.
func class(n int) int {
	if n > 1<<minClassShift {
		return bits.Len(uint(n-1)) - minClassShift
	}
	return 0
}

// ClassSize is the size of the buffer Get(n) returns: n rounded up to a
// power of two, at least 4 KiB.
func ClassSize(n int) int { return 1 << (class(n) + minClassShift) }

// Get returns a buffer of at least n bytes (n <= 4 GiB).
func (p *Pool) Get(n int) *Buf {
	c := class(n)
	p.mu.Lock()
	if l := len(p.free[c]); l > 0 {
		b := p.free[c][l-1]
		p.free[c] = p.free[c][:l-1]
		p.mu.Unlock()
		return b
	}
	p.mu.Unlock()
	b := &Buf{B: make([]byte, 1<<(c+minClassShift)), class: c, pool: p}
	b.Release = b.Put
	return b
}

// Hold marks the first n bytes as handed to a sink; Put (once) frees them
// and runs onFree(n).
func (b *Buf) Hold(n int, onFree func(int)) {
	b.n, b.onFree = n, onFree
	b.pool.Held.Hold(int64(n))
}

// Put returns the buffer to its pool, releasing what Hold marked.
func (b *Buf) Put() {
	if b.n > 0 {
		b.pool.Held.Hold(-int64(b.n))
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
