package builder

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/schemas"
)

func TestTimesliceOverlap(t *testing.T) {
	// Slices of 100 ns; fragments up to 10 ns into a slice also go to the
	// previous one. Sources 1 and 2 send in time order per source.
	groups := []schemas.SourceGroup{{Name: "sts", Sources: []uint32{1}}, {Name: "tof", Sources: []uint32{2}}}
	h := newHarness(t, Config{Mode: schemas.ModeTimeslice, Groups: groups, SliceDuration: 100, Overlap: 10, Timeout: time.Hour, BatchLatency: time.Hour}, true)
	rel := newReleases()
	moved := func() uint64 { h.b.mu.Lock(); defer h.b.mu.Unlock(); return h.b.moved }
	for _, step := range []struct {
		f     schemas.Fragment
		moved uint64 // timeslices emitted after adding f
	}{
		{frag(1, 5, "A", false, 0), 0},
		{frag(2, 50, "B", false, 0), 0},
		{frag(1, 95, "C", false, 0), 0},
		{frag(1, 105, "D", false, 0), 0}, // core of slice 1, overlap of slice 0
		{frag(2, 150, "E", false, 0), 0}, // source 1 has not passed 110 yet
		{frag(2, 150, "e", false, 0), 0}, // duplicate (same source, same timestamp)
		{frag(1, 250, "F", false, 0), 1}, // both past 110: slice 0 complete
		{frag(2, 199, "G", true, 0), 1},  // corrupt; source 2 not past 210 yet
		{frag(2, 260, "H", false, 0), 2}, // both past 210: slice 1 complete
	} {
		mustAdd(t, h.b, step.f, rel.next())
		if m := moved(); m != step.moved {
			t.Fatalf("after fragment at %d ns: %d timeslices emitted, want %d", step.f.EventID, m, step.moved)
		}
	}
	if err := h.b.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, h.b, frag(2, 60, "late", false, 0), rel.next())
	rows := h.close()
	rel.check(t)
	slices.SortFunc(rows, func(a, b row) int { return int(a.id) - int(b.id) })
	if len(rows) != 3 {
		t.Fatalf("%d timeslices, want 3", len(rows))
	}
	want := []struct {
		id     uint64
		status schemas.EventStatus
		nfrag  int
		s1, s2 string
		corr   []uint32
	}{
		{0, 0, 4, "ACD", "B", nil},
		{1, schemas.StatusDuplicates | schemas.StatusCorrupt, 3, "D", "EG", []uint32{2}},
		{2, 0, 2, "F", "H", nil}, // complete at Close: every source contributed
	}
	for i, w := range want {
		r := rows[i]
		if r.id != w.id || r.status != w.status || r.nfrag != w.nfrag || string(r.payloads[1]) != w.s1 || string(r.payloads[2]) != w.s2 || !slices.Equal(r.corrupt, w.corr) {
			t.Errorf("timeslice %d: id %d status %b nfrag %d payloads %q/%q corrupt %v; want %+v",
				i, r.id, r.status, r.nfrag, r.payloads[1], r.payloads[2], r.corrupt, w)
		}
		if r.ts != w.id*100 {
			t.Errorf("timeslice %d: timestamp %d, want %d", i, r.ts, w.id*100)
		}
		if r.sizes[1] != uint32(len(w.s1)) {
			t.Errorf("timeslice %d: size of source 1 is %d, want %d", i, r.sizes[1], len(w.s1))
		}
	}
	l := h.b.Ledger()
	checkBalanced(t, l)
	if l.FragmentsIn != 10 || l.FragmentsInEvents != 8 || l.Discarded[ReasonDuplicate] != 1 || l.Discarded[ReasonLate] != 1 || l.OverlapCopies != 1 {
		t.Errorf("ledger %+v", l)
	}
	if l.EventsComplete != 3 || l.EventsCorrupt != 1 {
		t.Errorf("events: complete %d corrupt %d", l.EventsComplete, l.EventsCorrupt)
	}
}

func TestTimesliceIncompleteAtTimeout(t *testing.T) {
	groups := []schemas.SourceGroup{{Name: "a", Sources: []uint32{1, 2, 3}}}
	h := newHarness(t, Config{Mode: schemas.ModeTimeslice, Groups: groups, SliceDuration: 1000, Overlap: 100, Timeout: 5 * time.Millisecond, BatchLatency: time.Millisecond}, true)
	mustAdd(t, h.b, frag(1, 10_050, "x", false, 0), nil) // slice 10, and overlap of 9
	mustAdd(t, h.b, frag(3, 10_500, "y", false, 0), nil)
	waitFor(t, "timeout", func() bool { return len(h.snapshot()) == 2 })
	rows := h.close()
	slices.SortFunc(rows, func(a, b row) int { return int(a.id) - int(b.id) })
	// Slice 9 holds only the overlap copy: every source is missing from its core.
	if rows[0].id != 9 || rows[0].status != schemas.StatusIncomplete || !slices.Equal(rows[0].missing, []uint32{1, 2, 3}) || string(rows[0].payloads[1]) != "x" {
		t.Errorf("slice 9: %+v", rows[0])
	}
	if rows[1].id != 10 || rows[1].status != schemas.StatusIncomplete || !slices.Equal(rows[1].missing, []uint32{2}) {
		t.Errorf("slice 10: %+v", rows[1])
	}
	l := h.b.Ledger()
	checkBalanced(t, l)
	if l.FragmentsInEvents != 2 || l.EventsIncomplete != 2 {
		t.Errorf("ledger %+v", l)
	}
}
