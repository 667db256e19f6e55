package pool

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

func TestFirstFitCoalesces(t *testing.T) {
	p, err := New(16*Align, 8*Align, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var slots []*Slot
	for i := 0; i < 16; i++ {
		s := p.TryGet(1)
		if s == nil || s.Offset() != i*Align || len(s.Bytes()) != 1 {
			t.Fatalf("slot %d: %+v", i, s)
		}
		slots = append(slots, s)
	}
	if p.TryGet(1) != nil || p.Held() != 16*Align {
		t.Fatalf("full pool gave a slot; held %d", p.Held())
	}
	// Free 3..10 out of order: they must coalesce into one 8-page extent.
	for _, i := range []int{5, 3, 9, 4, 10, 7, 6, 8} {
		slots[i].Release()
	}
	big := p.TryGet(8 * Align)
	if big == nil || big.Offset() != 3*Align {
		t.Fatalf("8 pages after coalescing: %+v (free %v)", big, p.free)
	}
	big.Release()
	for _, i := range []int{0, 1, 2, 11, 12, 13, 14, 15} {
		slots[i].Release()
	}
	if p.Held() != 0 || len(p.free) != 1 || p.free[0] != (extent{0, 16 * Align}) {
		t.Fatalf("after all releases: held %d, free %v", p.Held(), p.free)
	}
}

func TestWaitersFIFO(t *testing.T) {
	p, _ := New(4*Align, 4*Align, nil, nil)
	defer p.Close()
	all := p.TryGet(4 * Align)
	ctx := context.Background()
	got := make(chan int, 2)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // first waiter: the whole pool
		defer wg.Done()
		s, err := p.Get(ctx, 4*Align)
		if err != nil {
			t.Error(err)
			return
		}
		got <- 1
		time.Sleep(10 * time.Millisecond)
		s.Release()
	}()
	for p.Waits() < 1 {
		time.Sleep(time.Millisecond)
	}
	wg.Add(1)
	go func() { // second, small: must not overtake the first
		defer wg.Done()
		s, err := p.Get(ctx, 1)
		if err != nil {
			t.Error(err)
			return
		}
		got <- 2
		s.Release()
	}()
	for p.Waits() < 2 {
		time.Sleep(time.Millisecond)
	}
	if p.TryGet(1) != nil {
		t.Fatal("TryGet overtook waiters")
	}
	all.Release()
	wg.Wait()
	if a, b := <-got, <-got; a != 1 || b != 2 {
		t.Fatalf("order %d %d, want 1 2", a, b)
	}
}

func TestGetCancelAndClose(t *testing.T) {
	var lastRan int
	p, _ := New(2*Align, Align, nil, func() { lastRan++ })
	a, b := p.TryGet(Align), p.TryGet(Align)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if _, err := p.Get(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled Get: %v", err)
	}
	if len(p.waiters) != 0 {
		t.Fatal("cancelled waiter left queued")
	}
	done := make(chan error)
	go func() { _, err := p.Get(context.Background(), 1); done <- err }()
	for p.Waits() < 2 {
		time.Sleep(time.Millisecond)
	}
	p.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("waiter at close: %v", err)
	}
	a.Release()
	if p.Unmapped() || lastRan != 0 {
		t.Fatal("unmapped while a slot is held")
	}
	_ = b.Bytes()[0] // still readable
	b.Release()
	if !p.Unmapped() || lastRan != 1 {
		t.Fatalf("not unmapped after the last release (lastRan %d)", lastRan)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("second Release did not panic")
		}
	}()
	b.Release()
}

// TestRandomAllocFree checks the allocator's invariants under random use:
// no two slots overlap, held bytes add up, everything coalesces at the end.
func TestRandomAllocFree(t *testing.T) {
	const pages = 256
	p, _ := New(pages*Align, pages*Align, nil, nil)
	defer p.Close()
	r := rand.New(rand.NewPCG(1, 2))
	owner := make([]int, pages)
	var live []*Slot
	for step := 0; step < 20000; step++ {
		if len(live) > 0 && r.IntN(2) == 0 {
			i := r.IntN(len(live))
			s := live[i]
			for pg := s.off / Align; pg < (s.off+s.size)/Align; pg++ {
				owner[pg] = 0
			}
			s.Release()
			live = append(live[:i], live[i+1:]...)
			continue
		}
		n := r.IntN(8*Align) + 1
		s := p.TryGet(n)
		if s == nil {
			continue
		}
		for pg := s.off / Align; pg < (s.off+s.size)/Align; pg++ {
			if owner[pg] != 0 {
				t.Fatalf("step %d: page %d handed out twice", step, pg)
			}
			owner[pg] = step + 1
		}
		live = append(live, s)
		var held int
		for _, l := range live {
			held += l.size
		}
		if int64(held) != p.Held() {
			t.Fatalf("held %d, slots add up to %d", p.Held(), held)
		}
	}
	for _, s := range live {
		s.Release()
	}
	if len(p.free) != 1 || p.Held() != 0 {
		t.Fatalf("end: free %v held %d", p.free, p.Held())
	}
}
