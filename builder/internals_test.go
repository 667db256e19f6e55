package builder

import (
	"context"
	"math/rand"
	"testing"

	"github.com/sluice-daq/sluice/schemas"
)

// The event table must behave like a map under random inserts and deletes,
// including keys that collide in their home slot.
func TestEventTableMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	tb := newEventTable(64)
	ref := map[uint64]*event{}
	keys := func() uint64 {
		if rng.Intn(2) == 0 {
			return uint64(rng.Intn(300)) // dense, consecutive
		}
		return uint64(rng.Intn(40)) << 58 // high bits only: stress the hash
	}
	for range 20000 {
		k := keys()
		switch e := tb.get(k); {
		case e != ref[k]:
			t.Fatalf("get(%d) = %v, map has %v", k, e, ref[k])
		case e == nil && len(ref) < 64:
			e = &event{key: k}
			tb.put(e)
			ref[k] = e
		case e != nil:
			tb.remove(k)
			delete(ref, k)
		}
	}
	for k, e := range ref {
		if tb.get(k) != e {
			t.Fatalf("key %d lost", k)
		}
	}
}

func TestEmittedWindow(t *testing.T) {
	w := newEmittedWindow(128)
	if w.late(0) || w.late(1<<40) {
		t.Fatal("nothing emitted yet, nothing is late")
	}
	for _, k := range []uint64{1000, 1002, 990} {
		w.mark(k)
	}
	for k, want := range map[uint64]bool{1000: true, 1002: true, 990: true, 1001: false, 999: false, 1003: false, 1002 - 128: true, 875: false, 900: false} {
		if got := w.late(k); got != want {
			t.Errorf("late(%d) = %v, want %v", k, got, want)
		}
	}
	// A jump past the whole window forgets the old bits but not the age rule.
	w.mark(5000)
	if !w.late(5000) || !w.late(1001) || w.late(4999) || w.late(4900) {
		t.Errorf("after a jump: late(5000)=%v late(1001)=%v late(4999)=%v late(4900)=%v", w.late(5000), w.late(1001), w.late(4999), w.late(4900))
	}
	// Dense advance across word boundaries clears reused bits.
	for k := uint64(5001); k < 5400; k += 2 {
		w.mark(k)
	}
	for k := uint64(5273); k < 5400; k++ {
		if got, want := w.late(k), k%2 == 1; got != want {
			t.Fatalf("dense: late(%d) = %v, want %v", k, got, want)
		}
	}
}

func TestPoolAllocatorReuses(t *testing.T) {
	p := newPoolAllocator()
	a := p.Allocate(1000)
	if len(a) != 1000 || cap(a) != 1024 {
		t.Fatalf("len %d cap %d", len(a), cap(a))
	}
	a[0] = 7
	p.Free(a)
	b := p.Allocate(600)
	if &b[:1][0] != &a[:1][0] {
		t.Error("a freed buffer of the same class was not reused")
	}
	c := p.Reallocate(5000, b)
	if len(c) != 5000 || c[0] != 7 {
		t.Errorf("Reallocate: len %d first byte %d", len(c), c[0])
	}
	p.Free(c)
	if p.Allocate(0) != nil {
		t.Error("Allocate(0) should be nil")
	}
}

// Source ids above the dense-table limit go through the map and still work.
func TestSparseSourceIDs(t *testing.T) {
	groups := []schemas.SourceGroup{{Name: "far", Sources: []uint32{7, 1 << 30, 0xFFFFFFFF}}}
	h := newHarness(t, Config{Groups: groups}, true)
	if h.b.sparse == nil {
		t.Fatal("expected the map-based source index")
	}
	for _, s := range groups[0].Sources {
		mustAdd(t, h.b, frag(s, 1, "x", false, 0), nil)
	}
	mustAdd(t, h.b, frag(8, 1, "x", false, 0), nil)
	rows := h.close()
	if len(rows) != 1 || rows[0].status != 0 || rows[0].nfrag != 3 {
		t.Errorf("rows %+v", rows)
	}
	if l := h.b.Ledger(); l.Discarded[ReasonUnknownSource] != 1 {
		t.Errorf("ledger %+v", l)
	}
}

// AddPacket with a packet from an unknown source, after Close, and on a
// cancelled context counts every fragment of it.
func TestPacketDiscardsCountEveryFragment(t *testing.T) {
	h := newHarness(t, Config{Groups: fourSources, MaxOpenEvents: 1}, true)
	pkt := func(src uint32, first uint64) schemas.MFP {
		p, _, err := schemas.DecodeMFP(schemas.AppendMFP(nil, src, first, 0, 0, [][]byte{[]byte("a"), []byte("bb"), []byte("ccc")}, nil))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	rel := newReleases()
	if err := h.b.AddPacket(context.Background(), pkt(99, 0), rel.next()); err != nil {
		t.Fatal(err)
	}
	// MaxOpenEvents 1: the second fragment needs a second event and blocks;
	// an already-cancelled context gives up at once.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.b.AddPacket(ctx, pkt(10, 10), rel.next()); err != context.Canceled {
		t.Fatalf("AddPacket on a full builder with a cancelled context: %v", err)
	}
	h.close()
	if err := h.b.AddPacket(context.Background(), pkt(10, 20), rel.next()); err != ErrClosed {
		t.Fatalf("AddPacket after Close: %v", err)
	}
	rel.check(t)
	l := h.b.Ledger()
	checkBalanced(t, l)
	want := map[string]uint64{ReasonUnknownSource: 3, ReasonCancelled: 2, ReasonClosed: 3}
	for r, n := range want {
		if l.Discarded[r] != n {
			t.Errorf("%s = %d, want %d (%v)", r, l.Discarded[r], n, l.Discarded)
		}
	}
	if l.FragmentsIn != 9 || l.BytesIn != 18 || l.FragmentsInEvents != 1 {
		t.Errorf("ledger %+v", l)
	}
}
