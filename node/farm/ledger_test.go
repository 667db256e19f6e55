package farm

import (
	"encoding/json"
	"errors"
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

// TestLedgerInherit: a new EM's ledger goes on from the one its
// predecessor published (through JSON, as in etcd): what was done stays
// done (announced or carried over again counts nothing), what was open
// is built when announced again, or lost as unheld when the takeover
// ends; the balance covers the whole run.
func TestLedgerInherit(t *testing.T) {
	old := NewLedger()
	old.Announce(events(0, 100))
	old.Built(events(0, 40), "a", 40)
	old.Lost(events(40, 10), LostRUDead)
	old.Duplicate(events(0, 5), "a")
	js, err := json.Marshal(old.Summary())
	if err != nil {
		t.Fatal(err)
	}
	var prev LedgerSummary
	if err := json.Unmarshal(js, &prev); err != nil {
		t.Fatal(err)
	}
	l := NewLedger()
	if err := l.Inherit(prev); err != nil {
		t.Fatal(err)
	}
	if s := l.Summary(); s.Announced != 100 || s.Built != 40 || s.Open != 50 || !reflect.DeepEqual(s.Sets, prev.Sets) {
		t.Fatalf("inherited %+v, want %+v", s, prev)
	}
	if rest, dup := l.fresh(events(0, 100)); dup != 50 || rest.Len() != 50 || rest.Ranges[0] != (Range{50, 50}) {
		t.Fatalf("fresh after inherit: %v, %d known", rest, dup)
	}
	l.Announce(events(30, 30))     // a takeover's adoption: 30-49 done, 50-59 open
	l.Carried(events(30, 10), "a") // built under the old EM, inherited: nothing
	l.Carried(events(50, 10), "b") // built under the old EM after it published
	l.Announce(events(60, 30))     // the trigger RU announcing again what it holds
	l.Built(events(60, 30), "c", 30)
	if s := l.Summary(); s.Announced != 100 || s.Open != 10 || s.Violations != 0 {
		t.Fatalf("before unheld: %+v", s)
	}
	l.Unheld() // 90-99: nobody held them
	s := l.Summary()
	if !s.Balanced || s.Announced != 100 || s.Built != 80 || s.Carried != 10 || s.Lost[LostRUDead] != 10 ||
		s.Lost[LostUnheld] != 10 || s.Duplicate != 5 || s.PerBU["a"] != 40 || s.PerBU["b"] != 10 || s.PerBU["c"] != 30 {
		t.Fatalf("after the takeover:\n%s%+v", s, s)
	}
	if got := s.LostIDs[LostUnheld]; len(got) != 1 || got[0].First != 90 || got[0].N != 10 {
		t.Fatalf("unheld ids %+v", got)
	}
	// Announcing again what was announced again is still a violation; so
	// is inheriting into a ledger in use, or sets that disagree with counts.
	l.Announce(events(60, 1))
	if l.Balanced() {
		t.Fatal("balanced after announcing an element twice")
	}
	if err := l.Inherit(prev); !errors.Is(err, ErrInherit) {
		t.Fatalf("inherit into a used ledger: %v", err)
	}
	bad := prev
	bad.Built++
	if err := NewLedger().Inherit(bad); !errors.Is(err, ErrInherit) {
		t.Fatalf("inherit of inconsistent counts: %v", err)
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
