package pool

import (
	"testing"
	"unsafe"
)

func TestRecycle(t *testing.T) {
	a := New(1 << 20)
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
