// Package pool is a recycling Arrow allocator for the replay cursor. Fresh
// memory is expensive on the farm's virtual machines (the first touch of a
// page costs ~15 µs, measured on the 2-core CI machines), and a replay allocates the same
// few-megabyte payload buffers batch after batch; recycling them makes
// replay reads run at the speed of warm memory.
package pool

import (
	"math/bits"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// minPooled is the smallest buffer the pool keeps; smaller ones (offsets
// and metadata columns) go to the Go allocator and its garbage collector.
const minPooled = 64 << 10

// Allocator recycles buffers of at least 64 KiB in power-of-two size
// classes, holding at most a configured number of bytes of free buffers.
// It is safe for concurrent use. Buffers it hands out are 64-byte aligned
// (large Go allocations are page aligned).
type Allocator struct {
	small memory.GoAllocator
	mu    sync.Mutex
	free  [64][][]byte // by size class: cap == 1<<class
	held  int          // bytes in free
	max   int
}

// New returns an allocator that keeps up to maxHeld bytes of free buffers.
func New(maxHeld int) *Allocator { return &Allocator{max: maxHeld} }

// class is the size class of a buffer of size bytes: the smallest power of
// two at least size.
func class(size int) int { return bits.Len(uint(size - 1)) }

// Allocate returns a buffer of size bytes; its contents are not zeroed
// when it is recycled (Arrow's builders zero what they need).
func (a *Allocator) Allocate(size int) []byte {
	if size < minPooled {
		return a.small.Allocate(size)
	}
	c := class(size)
	a.mu.Lock()
	if n := len(a.free[c]); n > 0 {
		b := a.free[c][n-1]
		a.free[c] = a.free[c][:n-1]
		a.held -= cap(b)
		a.mu.Unlock()
		return b[:size]
	}
	a.mu.Unlock()
	return make([]byte, size, 1<<c)
}

// Reallocate grows or shrinks b to size bytes, keeping its contents.
func (a *Allocator) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	nb := a.Allocate(size)
	copy(nb, b)
	a.Free(b)
	return nb
}

// Free returns b to the pool, or drops it when the pool is full or b did
// not come from a size class.
func (a *Allocator) Free(b []byte) {
	c := cap(b)
	if c < minPooled || c&(c-1) != 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.held+c > a.max {
		return
	}
	a.free[class(c)] = append(a.free[class(c)], b[:0])
	a.held += c
}

// Held is the number of bytes of free buffers in the pool.
func (a *Allocator) Held() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held
}
