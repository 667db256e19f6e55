package builder

import (
	"context"
	"math/rand"
	"testing"

	"github.com/sluice-daq/sluice/schemas"
)

// The event table must behave like a map under random inserts and deletes,
// including keys that collide in their home slot and keys open in two
// epochs at once.
func TestEventTableMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	tb := newEventTable(64)
	type tk struct {
		k  uint64
		ep uint32
	}
	ref := map[tk]*event{}
	keys := func() tk {
		ep := uint32(rng.Intn(3))
		if rng.Intn(2) == 0 {
			return tk{uint64(rng.Intn(300)), ep} // dense, consecutive
		}
		return tk{uint64(rng.Intn(40)) << 58, ep} // high bits only: stress the hash
	}
	for range 20000 {
		k := keys()
		switch e := tb.get(k.k, k.ep); {
		case e != ref[k]:
			t.Fatalf("get(%v) = %v, map has %v", k, e, ref[k])
		case e == nil && len(ref) < 64:
			e = &event{key: k.k, epoch: k.ep}
			tb.put(e)
			ref[k] = e
		case e != nil:
			tb.remove(e)
			delete(ref, k)
		}
	}
	for k, e := range ref {
		if tb.get(k.k, k.ep) != e {
			t.Fatalf("key %v lost", k)
		}
	}
}

func TestEmittedWindow(t *testing.T) {
	w := newEmittedWindow(4)
	if w.late(0) || w.late(1<<40) {
		t.Fatal("nothing emitted yet, nothing is late")
	}
	check := func(step string, want map[uint64]bool) {
		t.Helper()
		for k, v := range want {
			if got := w.late(k); got != v {
				t.Errorf("%s: late(%d) = %v, want %v", step, k, got, v)
			}
		}
	}
	for _, k := range []uint64{1000, 1002, 990} {
		w.mark(k, true)
	}
	check("in order", map[uint64]bool{1000: true, 1002: true, 990: true, 989: true, 991: false, 1001: false, 1003: false})
	// A corrupt huge id must not make ordinary ids late.
	w.mark(1<<62, true)
	check("huge id", map[uint64]bool{1 << 62: true, 1001: false, 1003: false, 5: true})
	// The window holds 4 keys: 1000, the oldest, is forgotten; 990 stays
	// the minimum, so 1000 could be opened again.
	w.mark(1001, true)
	check("forget", map[uint64]bool{989: true, 990: true, 995: false, 1000: false, 1001: true, 1003: false})
	for k := uint64(1003); k < 1100; k++ {
		w.mark(k, true)
	}
	check("slide", map[uint64]bool{1095: true, 1096: true, 1099: true, 1100: false, 1 << 62: false, 2000: false})
	// A key emitted without the lower edge (fewer than a quorum of sources
	// in its event) is late itself, and moves nothing: 5000 emitted alone
	// before anything else, then 0.. are not late.
	w.reset()
	check("reset", map[uint64]bool{1099: false, 0: false})
	w.mark(5000, false)
	check("edge-less key", map[uint64]bool{5000: true, 0: false, 4999: false, 5001: false})
	w.mark(10, true)
	check("edge after it", map[uint64]bool{5000: true, 9: true, 10: true, 11: false})
}

// The late window must agree with a brute-force model under random
// emissions, including re-emitted keys.
func TestEmittedWindowModel(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	const size = 32
	w := newEmittedWindow(size)
	type mk struct {
		k    uint64
		edge bool
	}
	var last []mk
	for i := range 20000 {
		if rng.Intn(2000) == 0 {
			w.reset()
			last = nil
		}
		k := uint64(i/2 + rng.Intn(50))
		if rng.Intn(100) == 0 {
			k = rng.Uint64()
		}
		edge := rng.Intn(5) != 0
		w.mark(k, edge)
		last = append(last, mk{k, edge})
		if len(last) > size {
			last = last[1:]
		}
		q := uint64(i/2 + rng.Intn(80) - 20)
		in, below, edges := false, true, 0
		for _, x := range last {
			in = in || x.k == q
			if x.edge {
				edges++
				below = below && q < x.k
			}
		}
		want := in || (edges > 0 && below)
		if got := w.late(q); got != want {
			t.Fatalf("step %d: late(%d) = %v, want %v", i, q, got, want)
		}
		if got := w.has(q); got != in {
			t.Fatalf("step %d: has(%d) = %v, want %v", i, q, got, in)
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
