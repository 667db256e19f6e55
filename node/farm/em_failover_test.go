package farm

import (
	"reflect"
	"testing"
	"time"
)

// TestEMFailoverVoidAndDuplicates: a BU declared dead holding three
// unreleased assignments yields one void record naming them; they go to
// the other BU as credit allows, and the failover's Done time is when the
// last of them went out. The dead BU's report of events it had stored of
// them counts duplicate_after_failover once the other BU built them; a
// report naming events not reassigned from it is ignored.
func TestEMFailoverVoidAndDuplicates(t *testing.T) {
	clock := newClock()
	m := newTestEM(t, pushCfg(), clock)
	m.Join("a", 100)
	m.Join("b", 200)
	m.Credit(Credit{Epoch: 7, Incarnation: 100, BU: "a", Events: 30, Bytes: 1 << 40})
	if err := m.Announce(events(0, 40)); err != nil {
		t.Fatal(err)
	}
	as := assigns(m.Outputs())
	if len(as) != 3 || as[0].BU != "a" {
		t.Fatalf("assignments %+v", as)
	}
	m.Release(Release{Incarnation: 100, BU: "a", Entries: []ReleaseEntry{{Assignment: as[0].ID, Outcome: OutcomeDecided, Events: 10}}})
	m.Outputs()
	m.Credit(Credit{Epoch: 7, Incarnation: 100, BU: "a", Events: 10, Bytes: 1 << 40})
	as = append(as, assigns(m.Outputs())...) // the 4th: 30..39
	clock.advance(time.Second)
	dead := clock.t
	m.Dead("a", 100)
	var voids []VoidRecord
	for _, o := range m.Outputs() {
		if o.Kind == OutVoid {
			voids = append(voids, o.Void)
		}
	}
	if len(voids) != 1 || voids[0].BU != "a" || voids[0].Incarnation != 100 || voids[0].Epoch != 7 ||
		!reflect.DeepEqual(voids[0].Assigns, as[1:]) {
		t.Fatalf("void records %+v, want one of %+v", voids, as[1:])
	}
	f := m.Stats().Failovers
	if len(f) != 1 || f[0].Open != 3 || f[0].Reassigned != 0 || !f[0].Suspected.Equal(dead) || !f[0].Done.IsZero() {
		t.Fatalf("failover %+v", f)
	}
	// b has room for two: the third waits.
	m.Credit(Credit{Epoch: 7, Incarnation: 200, BU: "b", Events: 20, Bytes: 1 << 40})
	re := assigns(m.Outputs())
	if len(re) != 2 || re[0].Supersedes != as[1].ID || re[1].Supersedes != as[2].ID {
		t.Fatalf("reassignments %+v", re)
	}
	if f := m.Stats().Failovers[0]; f.Reassigned != 2 || !f.Done.IsZero() {
		t.Fatalf("failover after two %+v", f)
	}
	clock.advance(300 * time.Millisecond)
	m.Credit(Credit{Epoch: 7, Incarnation: 200, BU: "b", Events: 10, Bytes: 1 << 40})
	re = append(re, assigns(m.Outputs())...)
	if f := m.Stats().Failovers[0]; f.Reassigned != 3 || !f.Done.Equal(dead.Add(300*time.Millisecond)) {
		t.Fatalf("failover done %+v", f)
	}
	// a, back as incarnation 101, stored 3 events of as[1] before dying.
	m.Join("a", 101)
	m.Duplicate(Duplicate{Incarnation: 101, Dead: 100, BU: "a", Unit: events(11, 3)})
	m.Duplicate(Duplicate{Incarnation: 101, Dead: 100, BU: "a", Unit: events(0, 2)}) // settled by a: not voided
	if s := m.Stats(); s.Duplicates != 3 || s.BadDuplicates != 2 {
		t.Fatalf("duplicates %d, bad %d", s.Duplicates, s.BadDuplicates)
	}
	if l := m.Ledger().Summary(); l.Balanced || l.Duplicate != 3 {
		t.Fatalf("ledger with the reassignments unbuilt: %+v", l)
	}
	for _, a := range re {
		m.Release(Release{Incarnation: 200, BU: "b", Entries: []ReleaseEntry{{Assignment: a.ID, Outcome: OutcomeDecided, Events: 10}}})
	}
	l := m.Ledger().Summary()
	if !l.Balanced || l.Built != 40 || l.Duplicate != 3 || l.PerBU["b"] != 30 ||
		!reflect.DeepEqual(l.DuplicateIDs, []KeyedRange{{Run: 1, Kind: UnitEvents, First: 11, N: 3}}) {
		t.Fatalf("ledger %s %+v", l, l)
	}
}
