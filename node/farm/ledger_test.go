package farm

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// TestRangeSetModel checks the range set against a map of numbers, near 0
// and near 2^64.
func TestRangeSetModel(t *testing.T) {
	for _, base := range []uint64{0, math.MaxUint64 - 200} {
		rng := rand.New(rand.NewPCG(1, base))
		var s rangeSet
		model := map[uint64]bool{}
		for i := 0; i < 2000; i++ {
			lo := base + rng.Uint64N(190)
			hi := lo + rng.Uint64N(min(10, math.MaxUint64-lo)+1)
			if rng.IntN(2) == 0 {
				var want uint64
				for x := lo; ; x++ {
					if model[x] {
						want++
					}
					if x == hi {
						break
					}
				}
				if got := s.overlap(lo, hi); got != want {
					t.Fatalf("overlap(%d, %d) = %d, want %d", lo-base, hi-base, got, want)
				}
				continue
			}
			var want uint64
			for x := lo; ; x++ {
				if model[x] {
					want++
				}
				model[x] = true
				if x == hi {
					break
				}
			}
			if got := s.add(lo, hi); got != want {
				t.Fatalf("add(%d, %d) overlap %d, want %d", lo-base, hi-base, got, want)
			}
			if s.count != uint64(len(model)) {
				t.Fatalf("count %d, model %d", s.count, len(model))
			}
			for j := 1; j < len(s.r); j++ {
				if s.r[j].lo <= s.r[j-1].hi+1 {
					t.Fatalf("spans not merged: %v", s.r)
				}
			}
		}
		var n uint64
		for _, r := range s.ranges(0) {
			n += uint64(r.N)
		}
		if n != s.count {
			t.Fatalf("ranges hold %d, count %d", n, s.count)
		}
	}
}

func TestRangeSetWhole(t *testing.T) {
	var s rangeSet
	s.add(0, math.MaxUint64)
	rs := s.ranges(3)
	if len(rs) != 3 || rs[0].First != 0 || rs[0].N != math.MaxUint32 {
		t.Fatalf("ranges %v", rs)
	}
}

func TestLedgerBalance(t *testing.T) {
	l := NewLedger()
	l.Announce(events(0, 100))
	l.Announce(Unit{Run: 1, Resync: 1, Kind: UnitEvents, Ranges: []Range{{0, 10}}}) // same ids, new resync
	l.Built(events(0, 50), "a", 50)
	l.Built(events(50, 40), "b", 40)
	l.Lost(events(90, 10), LostTimedOut)
	if l.Balanced() {
		t.Fatal("balanced with resync 1 open")
	}
	if s := l.Summary(); s.Open != 10 {
		t.Fatalf("open %d, want 10", s.Open)
	}
	l.Built(Unit{Run: 1, Resync: 1, Kind: UnitEvents, Ranges: []Range{{0, 10}}}, "a", 10)
	l.Duplicate(events(60, 5), "a")
	s := l.Summary()
	if !s.Balanced || s.Built != 100 || s.LostTotal() != 10 || s.Duplicate != 5 || s.PerBU["a"] != 60 {
		t.Fatalf("summary %+v", s)
	}
	if !strings.Contains(s.String(), "balanced") || !strings.Contains(s.String(), "timed_out") {
		t.Fatalf("string:\n%s", s)
	}
}

// TestLedgerViolations: building twice, building what was lost, building
// what was never announced, and a duplicate that was not rebuilt all
// unbalance the ledger and say what happened.
func TestLedgerViolations(t *testing.T) {
	for name, f := range map[string]func(l *Ledger){
		"built-twice": func(l *Ledger) { l.Built(events(0, 10), "a", 10); l.Built(events(5, 1), "b", 1) },
		"lost-built":  func(l *Ledger) { l.Lost(events(0, 10), LostRUDead); l.Built(events(0, 10), "a", 10) },
		"unannounced": func(l *Ledger) { l.Built(events(0, 10), "a", 10); l.Built(events(10, 1), "a", 1) },
		"dup-not-built": func(l *Ledger) {
			l.Built(events(0, 5), "a", 5)
			l.Lost(events(5, 5), LostRUDead)
			l.Duplicate(events(5, 1), "a")
		},
		"announced-2x": func(l *Ledger) { l.Announce(events(9, 2)); l.Built(events(0, 11), "a", 11) },
	} {
		l := NewLedger()
		l.Announce(events(0, 10))
		f(l)
		s := l.Summary()
		if s.Balanced || s.Violations == 0 || len(s.Problems) == 0 {
			t.Errorf("%s: %+v", name, s)
		}
	}
}

func TestSubtractUnit(t *testing.T) {
	var s rangeSet
	s.add(5, 7)
	s.add(10, 10)
	s.add(20, 30)
	u := Unit{Run: 1, Kind: UnitEvents, Ranges: []Range{{0, 12}, {25, 10}, {40, 1}}}
	got, ok := subtractUnit(u, &s)
	want := []Range{{0, 5}, {8, 2}, {11, 1}, {31, 4}, {40, 1}}
	if !ok || !reflect.DeepEqual(got.Ranges, want) {
		t.Fatalf("got %v, want %v", got.Ranges, want)
	}
	if _, ok := subtractUnit(Unit{Kind: UnitEvents, Ranges: []Range{{21, 3}}}, &s); ok {
		t.Fatal("a covered unit left something")
	}
}
