package wire

import (
	"slices"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// arenaAlign is the alignment (and granularity) of arena allocations: the
// 64 bytes Arrow recommends for buffers.
const arenaAlign = 64

// Arena is a memory.Allocator over a shared-memory region. Event batches
// built with it (by the builder, or by a trigger stage selecting events for
// the next one) already lie in memory every plugin maps, so they reach
// plugins without a copy (see Layout). When the region is full it falls
// back to the Go heap; such batches are copied to plugins instead. Safe for
// concurrent use.
type Arena struct {
	*Region
	base     uintptr
	fallback memory.Allocator

	mu   sync.Mutex
	free []span // free spans of the region, ascending, never adjacent
	high int    // highest end of an allocation so far: the pages touched
	// fallbackBytes counts bytes allocated from the heap because the
	// region was full, since the arena was made.
	fallbackBytes int64
}

// span is [start, end) in bytes from the region's start.
type span struct{ start, end int }

// NewArena creates a region of size bytes (rounded down to 64) in dir and an
// allocator over it.
func NewArena(dir string, size int) (*Arena, error) {
	size &^= arenaAlign - 1
	r, err := CreateRegion(dir, size)
	if err != nil {
		return nil, err
	}
	return &Arena{Region: r, base: uintptr(unsafe.Pointer(unsafe.SliceData(r.Data))),
		fallback: memory.NewGoAllocator(), free: []span{{0, size}}}, nil
}

// Allocate returns size zeroed bytes, 64-byte aligned, from the region if a
// free span is large enough, else from the Go heap.
func (a *Arena) Allocate(size int) []byte { return a.allocate(size, true) }

// Unzeroed returns an allocator over the same arena whose allocations are
// not cleared (as with the builder's own pool): for code that writes every
// byte it allocates, like the event builder, it saves a pass over the
// memory. Arrow's array builders clear their validity bitmaps themselves.
func (a *Arena) Unzeroed() memory.Allocator { return unzeroed{a} }

type unzeroed struct{ a *Arena }

func (u unzeroed) Allocate(size int) []byte { return u.a.allocate(size, false) }
func (u unzeroed) Free(b []byte)            { u.a.Free(b) }
func (u unzeroed) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	nb := u.a.allocate(size, false)
	copy(nb, b)
	u.a.Free(b)
	return nb
}

func (a *Arena) allocate(size int, zero bool) []byte {
	n := (size + arenaAlign - 1) &^ (arenaAlign - 1)
	if n == 0 {
		n = arenaAlign
	}
	a.mu.Lock()
	for i, s := range a.free {
		if s.end-s.start < n {
			continue
		}
		// First fit: take the front of the span.
		if a.free[i].start += n; a.free[i].start == s.end {
			a.free = slices.Delete(a.free, i, i+1)
		}
		a.high = max(a.high, s.start+n)
		a.mu.Unlock()
		b := a.Data[s.start : s.start+n : s.start+n]
		if zero {
			clear(b) // reused memory; Arrow's allocators return zeroed memory
		}
		return b[:size]
	}
	a.fallbackBytes += int64(size)
	a.mu.Unlock()
	return a.fallback.Allocate(size)
}

// HighWater is the highest offset any allocation reached: first fit reuses
// the region from its start, so this is how much of it was ever touched
// (resident shared memory), in bytes.
func (a *Arena) HighWater() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.high
}

// FallbackBytes is the bytes allocated from the Go heap because the region
// was full, in total since the arena was made.
func (a *Arena) FallbackBytes() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fallbackBytes
}

// Reallocate grows or shrinks b, moving it when needed.
func (a *Arena) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		if size > len(b) {
			clear(b[len(b):size])
		}
		return b[:size]
	}
	nb := a.Allocate(size)
	copy(nb, b)
	a.Free(b)
	return nb
}

// Free returns b (as Allocate or Reallocate gave it) to the region or to the
// Go heap.
func (a *Arena) Free(b []byte) {
	off, ok := a.Offset(b[:cap(b)])
	if !ok {
		a.fallback.Free(b)
		return
	}
	s := span{off, off + cap(b)}
	a.mu.Lock()
	defer a.mu.Unlock()
	i, _ := slices.BinarySearchFunc(a.free, s.start, func(x span, t int) int { return x.start - t })
	// Merge with the free neighbours so spans stay maximal.
	if i > 0 && a.free[i-1].end == s.start {
		s.start = a.free[i-1].start
		i--
		a.free = slices.Delete(a.free, i, i+1)
	}
	if i < len(a.free) && a.free[i].start == s.end {
		s.end = a.free[i].end
		a.free = slices.Delete(a.free, i, i+1)
	}
	a.free = slices.Insert(a.free, i, s)
}

// Offset returns where b starts in the region, and false if b (all of it)
// does not lie in the region.
func (a *Arena) Offset(b []byte) (int, bool) {
	if cap(b) == 0 {
		return 0, false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p < a.base || p+uintptr(len(b)) > a.base+uintptr(len(a.Data)) {
		return 0, false
	}
	return int(p - a.base), true
}

// FreeBytes is the region's unallocated size.
func (a *Arena) FreeBytes() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, s := range a.free {
		n += s.end - s.start
	}
	return n
}
