package recycle

import (
	"testing"
	"unsafe"
)

// The store's configuration: buffers of 64 KiB and more, 1 MiB held in all.
func TestRecycle(t *testing.T) {
	a := New(Limits{MinSize: 64 << 10, MaxHeld: 1 << 20})
	b := a.Allocate(100_000)
	if len(b) != 100_000 || cap(b) != 1<<17 {
		t.Fatalf("len %d cap %d, want 100000 and 131072", len(b), cap(b))
	}
	if uintptr(unsafe.Pointer(&b[0]))%64 != 0 {
		t.Fatal("pooled buffer not 64-byte aligned")
	}
	b[0] = 7
	a.Free(b)
	if a.Held() != 1<<17 {
		t.Fatalf("held %d after free", a.Held())
	}
	c := a.Allocate(70_000) // same class
	if &c[:1][0] != &b[:1][0] || c[0] != 7 {
		t.Fatal("buffer of the same class not reused")
	}
	if a.Held() != 0 {
		t.Fatalf("held %d after reuse", a.Held())
	}
	// Growing keeps the contents and recycles the old buffer.
	d := a.Reallocate(300_000, c)
	if len(d) != 300_000 || d[0] != 7 || a.Held() != 1<<17 {
		t.Fatalf("reallocate: len %d first %d held %d", len(d), d[0], a.Held())
	}
	// The pool keeps at most its limit; small buffers are not pooled.
	a.Free(d)
	a.Free(a.Allocate(1 << 20))
	if a.Held() > 1<<20 {
		t.Fatalf("held %d above the 1 MiB limit", a.Held())
	}
	s := a.Allocate(100)
	a.Free(s)
	if len(s) != 100 || a.Held() > 1<<20 {
		t.Fatalf("small buffer: len %d held %d", len(s), a.Held())
	}
}

// The builder's configuration: every size from 64 B, bounded per class.
func TestClassLimits(t *testing.T) {
	a := New(Limits{ClassBytes: 4 << 10, ClassCount: 3})
	if a.Allocate(0) != nil || a.Allocate(-1) != nil {
		t.Fatal("Allocate of no bytes should be nil")
	}
	// A 10-byte buffer is of the 64 B class and is recycled.
	b := a.Allocate(10)
	if len(b) != 10 || cap(b) != 64 || uintptr(unsafe.Pointer(&b[0]))%64 != 0 {
		t.Fatalf("len %d cap %d, want 10, 64, aligned", len(b), cap(b))
	}
	a.Free(b)
	if a.Held() != 64 {
		t.Fatalf("held %d after freeing a 64 B buffer", a.Held())
	}
	// ClassCount: a class keeps 3 buffers at most.
	var bs [][]byte
	for range 5 {
		bs = append(bs, a.Allocate(64))
	}
	for _, b := range bs {
		a.Free(b)
	}
	if a.Held() != 3*64 {
		t.Fatalf("held %d, want 3 buffers of 64 B", a.Held())
	}
	// ClassBytes: the 2 KiB class keeps 2 buffers (4 KiB), not 3.
	bs = bs[:0]
	for range 3 {
		bs = append(bs, a.Allocate(2000))
	}
	for _, b := range bs {
		a.Free(b)
	}
	if a.Held() != 3*64+2*2048 {
		t.Fatalf("held %d, want 3×64 + 2×2048", a.Held())
	}
	// Buffers not of a class are left alone.
	a.Free(make([]byte, 100))
	a.Free(make([]byte, 32))
	if a.Held() != 3*64+2*2048 {
		t.Fatalf("held %d after freeing foreign buffers", a.Held())
	}
}
