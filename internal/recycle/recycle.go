// Package recycle is the recycling Arrow allocator of the builder (batch
// assembly) and of the store (replay cursors). Touching fresh memory is what
// makes both slow (measured on the 2-core CI machines: ~15 µs for the first
// touch of a 4 KiB page; a builder on fresh allocations reached only 0.45 of
// memcpy), and both allocate the same buffer sizes batch after batch, so
// freed buffers are kept in power-of-two size classes and handed out again.
package recycle

import (
	"math/bits"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

const (
	minClass = 6  // 64 B, the smallest class: Arrow's alignment
	classes  = 64 // every size an int can hold
	align    = 64 // bytes, like Arrow's own allocators
)

// Limits bound what an Allocator keeps; a zero field is no bound.
type Limits struct {
	// MinSize is the smallest buffer recycled, in bytes. Smaller ones come
	// from Go's allocator and go back to its garbage collector.
	MinSize int
	// MaxHeld bounds the bytes of free buffers kept in all classes.
	MaxHeld int
	// ClassBytes bounds the bytes of free buffers kept in one class, so
	// that a burst of large batches does not pin memory forever.
	ClassBytes int
	// ClassCount bounds how many free buffers one class keeps.
	ClassCount int
}

// Allocator is a memory.Allocator recycling freed buffers in power-of-two
// size classes within its Limits; above them, freed buffers go to the
// garbage collector. It is safe for concurrent use. Buffers are 64-byte
// aligned and are NOT zeroed on reuse: its users (the builder, Arrow's
// builders in a cursor) write every byte they expose.
type Allocator struct {
	lim   Limits
	small memory.GoAllocator // below MinSize
	mu    sync.Mutex
	free  [classes][][]byte // per class, buffers of cap exactly 1<<class
	held  [classes]int      // bytes in free, per class
	total int               // bytes in free
}

var _ memory.Allocator = (*Allocator)(nil)

// New returns an allocator keeping free buffers within lim.
func New(lim Limits) *Allocator { return &Allocator{lim: lim} }

// class is the size class of a buffer of size bytes: the smallest power of
// two at least size, and at least 64.
func class(size int) int { return max(bits.Len(uint(size-1)), minClass) }

// Allocate returns a 64-byte aligned slice of len size (nil when size is
// not positive); a recycled one has cap 1<<class and old contents.
func (a *Allocator) Allocate(size int) []byte {
	if size <= 0 {
		return nil
	}
	if size < a.lim.MinSize {
		return a.small.Allocate(size)
	}
	c := class(size)
	a.mu.Lock()
	if l := a.free[c]; len(l) > 0 {
		b := l[len(l)-1]
		l[len(l)-1] = nil
		a.free[c] = l[:len(l)-1]
		a.held[c] -= cap(b)
		a.total -= cap(b)
		a.mu.Unlock()
		return b[:size]
	}
	a.mu.Unlock()
	n := 1 << c
	raw := make([]byte, n+align)
	shift := int(-uintptr(unsafe.Pointer(unsafe.SliceData(raw)))) & (align - 1)
	return raw[shift : shift+size : shift+n]
}

// Reallocate grows or shrinks b to size bytes, keeping its contents; in
// place when its capacity is enough.
func (a *Allocator) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	nb := a.Allocate(size)
	copy(nb, b)
	a.Free(b)
	return nb
}

// Free returns b (as returned by Allocate or Reallocate) to its class, or
// leaves it to the garbage collector when it is not of a class, is below
// MinSize or the class or the allocator is full.
func (a *Allocator) Free(b []byte) {
	c := cap(b)
	if c == 0 || c&(c-1) != 0 || c < a.lim.MinSize {
		return // not one of ours
	}
	k := bits.TrailingZeros(uint(c))
	if k < minClass {
		return
	}
	a.mu.Lock()
	if (a.lim.MaxHeld == 0 || a.total+c <= a.lim.MaxHeld) &&
		(a.lim.ClassBytes == 0 || a.held[k]+c <= a.lim.ClassBytes) &&
		(a.lim.ClassCount == 0 || len(a.free[k]) < a.lim.ClassCount) {
		a.free[k] = append(a.free[k], b[:c])
		a.held[k] += c
		a.total += c
	}
	a.mu.Unlock()
}

// Held is the number of bytes of free buffers kept.
func (a *Allocator) Held() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.total
}
