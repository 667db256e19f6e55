package builder

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/schemas"
)

// reports collects OnAssignmentDone calls.
type reports struct {
	mu sync.Mutex
	by map[uint64][]AssignmentReport
}

func (r *reports) add(a AssignmentReport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.by == nil {
		r.by = map[uint64][]AssignmentReport{}
	}
	r.by[a.ID] = append(r.by[a.ID], a)
}

func (r *reports) get(id uint64) []AssignmentReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.by[id])
}

func expect(t *testing.T, b *Builder, id uint64, ranges ...Range) {
	t.Helper()
	if err := b.Expect(Assignment{ID: id, Ranges: ranges}); err != nil {
		t.Fatal(err)
	}
}

// A farm BU: non-contiguous assignments that complete out of order, a
// reassigned old range arriving after later ones were built, ids outside
// every assignment; completeness per assignment, not by a window.
func TestAssignedOutOfOrder(t *testing.T) {
	var rep reports
	groups := []schemas.SourceGroup{{Name: "all", Sources: []uint32{1, 2, 3, 4}}}
	h := newHarness(t, Config{Groups: groups, Assigned: true, OnAssignmentDone: rep.add, Timeout: time.Hour, BatchLatency: time.Millisecond}, true)
	rel := newReleases()
	send := func(ids ...uint64) {
		for _, id := range ids {
			for _, s := range groups[0].Sources {
				mustAdd(t, h.b, frag(s, id, fmt.Sprint(s, "/", id), false, 0), rel.next())
			}
		}
	}
	expect(t, h.b, 7, Range{1000, 10}, Range{1020, 5})
	expect(t, h.b, 8, Range{10, 10})
	send(1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009, 1020, 1021, 1022, 1023, 1024) // assignment 7, complete
	send(5000)                                                                                     // in no assignment
	send(19, 18, 17, 16, 15, 14, 13, 12, 11, 10)                                                   // assignment 8, lower ids, later: not late
	waitFor(t, "both assignments reported", func() bool { return len(rep.get(7)) == 1 && len(rep.get(8)) == 1 })
	// Fragments for a built id: late, not a new event.
	mustAdd(t, h.b, frag(1, 1003, "again", false, 0), rel.next())
	// The EM reassigns 10..19 (a BU died, say) to this BU under a new id:
	// built again, as asked.
	expect(t, h.b, 9, Range{10, 10})
	send(10, 11, 12, 13, 14, 15, 16, 17, 18, 19)
	rows := h.close()
	rel.check(t)
	l := h.b.Ledger()
	checkBalanced(t, l)
	if len(rows) != 35 || l.EventsComplete != 35 || l.Discarded[ReasonUnassigned] != 4 || l.Discarded[ReasonLate] != 1 || l.Discards() != 5 {
		t.Fatalf("%d rows; ledger %+v", len(rows), l)
	}
	for id, want := range map[uint64]AssignmentReport{
		7: {ID: 7, Reason: DoneBuilt, Events: 15, Built: 15, Complete: 15},
		8: {ID: 8, Reason: DoneBuilt, Events: 10, Built: 10, Complete: 10},
		9: {ID: 9, Reason: DoneBuilt, Events: 10, Built: 10, Complete: 10},
	} {
		if got := rep.get(id); len(got) != 1 || !reflect.DeepEqual(got[0], want) {
			t.Errorf("assignment %d: reports %+v, want %+v", id, got, want)
		}
	}
	if l.AssignmentsDone != 3 || l.EventsMissing != 0 {
		t.Errorf("assignments done %d, events missing %d", l.AssignmentsDone, l.EventsMissing)
	}
}

// An assignment whose data stops coming is done after Timeout without a
// new event: its open events timed out (incomplete), the ids never seen
// are reported missing, and their fragments are late from then on.
func TestAssignedIdle(t *testing.T) {
	var rep reports
	groups := []schemas.SourceGroup{{Name: "all", Sources: []uint32{1, 2}}}
	h := newHarness(t, Config{Groups: groups, Assigned: true, OnAssignmentDone: rep.add, Timeout: 20 * time.Millisecond, BatchLatency: time.Millisecond}, true)
	expect(t, h.b, 1, Range{100, 4}, Range{200, 3})
	mustAdd(t, h.b, frag(1, 100, "a", false, 0), nil)
	mustAdd(t, h.b, frag(2, 100, "b", false, 0), nil)
	mustAdd(t, h.b, frag(1, 102, "c", false, 0), nil) // its partner never comes
	mustAdd(t, h.b, frag(2, 201, "d", false, 0), nil)
	waitFor(t, "the idle report", func() bool { return len(rep.get(1)) == 1 })
	got := rep.get(1)[0]
	want := AssignmentReport{ID: 1, Reason: DoneIdle, Events: 7, Built: 3, Complete: 1,
		Missing: []Range{{101, 1}, {103, 1}, {200, 1}, {202, 1}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("report %+v, want %+v", got, want)
	}
	mustAdd(t, h.b, frag(1, 103, "late", false, 0), nil)
	mustAdd(t, h.b, frag(2, 102, "late", false, 0), nil)
	h.close()
	l := h.b.Ledger()
	checkBalanced(t, l)
	if l.Discarded[ReasonLate] != 2 || l.EventsMissing != 4 || l.EventsIncomplete != 2 || l.EventsComplete != 1 {
		t.Fatalf("ledger %+v", l)
	}
}

// Seal: the farm BU knows an assignment's data is all in (a dead RU's
// sources will not come): its open events go at once, incomplete, with a
// timeout of an hour; another assignment's events stay open; ids never
// seen are missing, and fragments after the seal are late.
func TestAssignedSeal(t *testing.T) {
	var rep reports
	groups := []schemas.SourceGroup{{Name: "all", Sources: []uint32{1, 2, 3}}}
	h := newHarness(t, Config{Groups: groups, Assigned: true, OnAssignmentDone: rep.add, Timeout: time.Hour, BatchLatency: time.Millisecond}, true)
	expect(t, h.b, 1, Range{100, 3})
	expect(t, h.b, 2, Range{200, 1})
	for _, id := range []uint64{100, 101} { // source 3's RU died: never comes
		mustAdd(t, h.b, frag(1, id, "a", false, 0), nil)
		mustAdd(t, h.b, frag(2, id, "b", false, 0), nil)
	}
	mustAdd(t, h.b, frag(1, 200, "c", false, 0), nil)
	if err := h.b.Seal(1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the sealed report", func() bool { return len(rep.get(1)) == 1 })
	want := AssignmentReport{ID: 1, Reason: DoneSealed, Events: 3, Built: 2, Missing: []Range{{102, 1}}}
	if got := rep.get(1)[0]; !reflect.DeepEqual(got, want) {
		t.Fatalf("report %+v, want %+v", got, want)
	}
	if len(rep.get(2)) != 0 {
		t.Fatalf("assignment 2 done too: %+v", rep.get(2))
	}
	if err := h.b.Seal(1); err != nil { // again: nothing
		t.Fatal(err)
	}
	mustAdd(t, h.b, frag(3, 100, "late", false, 0), nil)
	h.close()
	l := h.b.Ledger()
	checkBalanced(t, l)
	if l.EventsIncomplete != 3 || l.Discarded[ReasonLate] != 1 || l.EventsMissing != 1 || len(rep.get(1)) != 1 {
		t.Fatalf("ledger %+v", l)
	}
	if err := newHarness(t, Config{Groups: groups, Timeout: time.Hour}, true).b.Seal(1); !errors.Is(err, ErrNotAssigned) {
		t.Fatalf("Seal without assigned mode: %v", err)
	}
}

// Close ends every assignment still expected, reporting it.
func TestAssignedClose(t *testing.T) {
	var rep reports
	groups := []schemas.SourceGroup{{Name: "all", Sources: []uint32{1, 2}}}
	h := newHarness(t, Config{Groups: groups, Assigned: true, OnAssignmentDone: rep.add, Timeout: time.Hour, BatchLatency: time.Hour}, true)
	expect(t, h.b, 3, Range{0, 2})
	mustAdd(t, h.b, frag(1, 0, "a", false, 0), nil)
	h.close()
	want := AssignmentReport{ID: 3, Reason: DoneClosed, Events: 2, Built: 1, Missing: []Range{{1, 1}}}
	if got := rep.get(3); len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("reports %+v, want %+v", got, want)
	}
	if err := h.b.Expect(Assignment{ID: 4, Ranges: []Range{{9, 1}}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Expect after Close: %v", err)
	}
}

func TestExpectErrors(t *testing.T) {
	groups := []schemas.SourceGroup{{Name: "all", Sources: []uint32{1}}}
	plain := newHarness(t, Config{Groups: groups}, true)
	if err := plain.b.Expect(Assignment{ID: 1, Ranges: []Range{{0, 1}}}); !errors.Is(err, ErrNotAssigned) {
		t.Fatalf("Expect without Assigned: %v", err)
	}
	h := newHarness(t, Config{Groups: groups, Assigned: true}, true)
	expect(t, h.b, 1, Range{100, 10})
	for _, a := range []Assignment{
		{ID: 2},
		{ID: 2, Ranges: []Range{{5, 0}}},
		{ID: 2, Ranges: []Range{{5, 3}, {6, 1}}},
		{ID: 2, Ranges: []Range{{math.MaxUint64 - 1, 3}}},
		{ID: 2, Ranges: []Range{{90, 11}}}, // overlaps 100
		{ID: 2, Ranges: []Range{{1, 1}, {109, 2}}},
		{ID: 1, Ranges: []Range{{500, 1}}}, // id live
	} {
		err := h.b.Expect(a)
		if !errors.Is(err, ErrAssignment) {
			t.Errorf("Expect(%+v) = %v, want ErrAssignment", a, err)
		}
		t.Log(err)
	}
	if _, err := New(Config{Groups: groups, Assigned: true, Mode: schemas.ModeTimeslice, SliceDuration: time.Millisecond}); !errors.Is(err, ErrConfig) {
		t.Fatalf("assigned timeslice mode: %v", err)
	}
}

// TestPropertyAssigned: random non-contiguous assignments (ids shuffled
// into ranges), delivered with their fragments in a random order across
// assignments, with duplicates, ids of no assignment, and some
// assignments reassigned after they were done. Every assigned id with a
// fragment builds exactly once per assignment holding it, every
// assignment is reported exactly once with its counts, and the ledger
// balances.
func TestPropertyAssigned(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			var rep reports
			srcs := []uint32{3, 5, 7, 9, 11}
			groups := []schemas.SourceGroup{{Name: "a", Sources: srcs}}
			h := newHarness(t, Config{Groups: groups, Assigned: true, OnAssignmentDone: rep.add, Timeout: time.Hour,
				BatchEvents: 8, BatchLatency: time.Millisecond, MaxOpenEvents: 4096}, true)
			rel := newReleases()
			type work struct {
				id     uint64
				ranges []Range
				ids    []uint64
			}
			var all []work
			next := uint64(1 << 40)
			for a := range uint64(30) {
				w := work{id: a + 1}
				for range 1 + rng.Intn(3) {
					next += uint64(1 + rng.Intn(50))
					r := Range{First: next, N: uint32(1 + rng.Intn(8))}
					next = r.Last() + 1
					w.ranges = append(w.ranges, r)
					for id := r.First; id <= r.Last(); id++ {
						w.ids = append(w.ids, id)
					}
				}
				all = append(all, w)
			}
			// Assignments come in a random order (out-of-order completion),
			// each with its fragments shuffled; a fifth are reassigned later.
			order := rng.Perm(len(all))
			var sent, unassigned, dups int
			for round, rs := range [][]int{order, order[:len(order)/5]} {
				for _, i := range rs {
					w := all[i]
					aid := w.id + uint64(round)*1000
					expect(t, h.b, aid, w.ranges...)
					var fs []schemas.Fragment
					for _, id := range w.ids {
						for _, s := range srcs {
							fs = append(fs, frag(s, id, fmt.Sprint(aid, "/", id, "/", s), false, 0))
						}
					}
					rng.Shuffle(len(fs), func(a, b int) { fs[a], fs[b] = fs[b], fs[a] })
					for k, f := range fs {
						mustAdd(t, h.b, f, rel.next())
						sent++
						if k%7 == 0 {
							mustAdd(t, h.b, f, rel.next()) // duplicate: first wins
							dups++
						}
						if rng.Intn(20) == 0 {
							mustAdd(t, h.b, frag(srcs[0], rng.Uint64()>>1, "stray", false, 0), rel.next())
							unassigned++
						}
					}
					waitFor(t, fmt.Sprint("assignment ", aid), func() bool { return len(rep.get(aid)) == 1 })
				}
			}
			rows := h.close()
			rel.check(t)
			l := h.b.Ledger()
			checkBalanced(t, l)
			want := 0
			for round, rs := range [][]int{order, order[:len(order)/5]} {
				for _, i := range rs {
					w := all[i]
					aid := w.id + uint64(round)*1000
					got := rep.get(aid)
					exp := AssignmentReport{ID: aid, Reason: DoneBuilt, Events: len(w.ids), Built: len(w.ids), Complete: len(w.ids)}
					if len(got) != 1 || !reflect.DeepEqual(got[0], exp) {
						t.Errorf("assignment %d: %+v, want %+v", aid, got, exp)
					}
					want += len(w.ids)
				}
			}
			if len(rows) != want || l.EventsComplete != uint64(want) || l.FragmentsInEvents != uint64(want*len(srcs)) {
				t.Errorf("%d rows, want %d; ledger %+v", len(rows), want, l)
			}
			// Strays: unassigned, or late when they hit a built id (never
			// here: ids are sparse and strays random).
			if l.Discarded[ReasonDuplicate]+l.Discarded[ReasonLate] != uint64(dups) || l.Discarded[ReasonUnassigned] != uint64(unassigned) {
				t.Errorf("discarded %v; %d duplicates, %d strays sent", l.Discarded, dups, unassigned)
			}
			if l.FragmentsIn != uint64(sent+dups+unassigned) {
				t.Errorf("in %d, sent %d", l.FragmentsIn, sent+dups+unassigned)
			}
			// A duplicate's first copy wins, so every row's fragments are of
			// one assignment's delivery.
			for _, r := range rows {
				aid := ""
				for _, p := range r.payloads {
					a, _, _ := strings.Cut(string(p), "/")
					if aid != "" && a != aid {
						t.Fatalf("event %d mixes assignments %s and %s", r.id, aid, a)
					}
					aid = a
				}
			}
		})
	}
}
