package farm

import (
	"reflect"
	"testing"
	"time"
)

// fakeClock is a Clock tests move by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func events(first uint64, n uint32) Unit {
	return Unit{Run: 1, Kind: UnitEvents, Ranges: []Range{{First: first, N: n}}}
}

// newTestEM returns an EM with a first block of ids [1, 1+block).
func newTestEM(t *testing.T, cfg EMConfig, clock Clock) *EM {
	t.Helper()
	m, err := NewEM(cfg, 7, clock)
	if err != nil {
		t.Fatal(err)
	}
	out := m.Outputs()
	if len(out) != 1 || out[0].Kind != OutReserve {
		t.Fatalf("first outputs %+v, want one reserve request", out)
	}
	if err := m.Reserved(Block{First: 1, End: 1 + cfg.BlockSize}); err != nil {
		t.Fatal(err)
	}
	return m
}

func assigns(out []Output) []Assign {
	var as []Assign
	for _, o := range out {
		if o.Kind == OutAssign {
			as = append(as, o.Assign)
		}
	}
	return as
}

func pushCfg() EMConfig {
	return EMConfig{Protocol: Push, AssignmentSize: 10, Release: OutcomeDecided, BlockSize: 1000}
}

func TestEMConfigValidate(t *testing.T) {
	good := pushCfg()
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*EMConfig){
		"protocol": func(c *EMConfig) { c.Protocol = 0 },
		"size":     func(c *EMConfig) { c.AssignmentSize = 0 },
		"pull-max": func(c *EMConfig) { c.Protocol = Pull },
		"release":  func(c *EMConfig) { c.Release = OutcomeReturned },
		"block":    func(c *EMConfig) { c.BlockSize = 0 },
		"linger":   func(c *EMConfig) { c.Linger = -1 },
	} {
		c := good
		mod(&c)
		if c.Validate() == nil {
			t.Errorf("%s: invalid config accepted", name)
		}
	}
}

// TestPushWeightedRoundRobin: with credits 3:1 the BUs get assignments
// 3:1, interleaved, each announced to the RUs, with consecutive ids.
func TestPushWeightedRoundRobin(t *testing.T) {
	m := newTestEM(t, pushCfg(), newClock())
	m.Join("a", 100)
	m.Join("b", 200)
	m.Credit(Credit{Epoch: 7, Incarnation: 100, BU: "a", Events: 300, Bytes: 1 << 40})
	m.Credit(Credit{Epoch: 7, Incarnation: 200, BU: "b", Events: 100, Bytes: 1 << 40})
	if err := m.Announce(events(0, 400)); err != nil {
		t.Fatal(err)
	}
	out := m.Outputs()
	as := assigns(out)
	if len(as) != 40 {
		t.Fatalf("%d assignments, want 40", len(as))
	}
	count := map[string]int{}
	for i, a := range as {
		count[a.BU]++
		if a.ID != uint64(i+1) || a.Epoch != 7 || a.Supersedes != 0 || a.Unit.Len() != 10 ||
			a.Unit.Ranges[0].First != uint64(10*i) {
			t.Fatalf("assignment %d = %+v", i, a)
		}
		if !out[i].ToRUs {
			t.Fatal("push assignment not announced to the RUs")
		}
	}
	if count["a"] != 30 || count["b"] != 10 {
		t.Fatalf("shares %v, want a:30 b:10", count)
	}
	// Interleaved: b appears in every window of 4 among the first 20.
	for i := 0; i+4 <= 20; i += 4 {
		nb := 0
		for _, a := range as[i : i+4] {
			if a.BU == "b" {
				nb++
			}
		}
		if nb != 1 {
			t.Fatalf("window %d has %d assignments of b, want 1: %v", i, nb, as[i:i+4])
		}
	}
	// No credit left: more work waits.
	m.Announce(events(400, 10))
	if len(assigns(m.Outputs())) != 0 {
		t.Fatal("assigned without credit")
	}
	if s := m.Stats(); s.Queued != 10 || s.Open != 40 || s.Assigned != 40 {
		t.Fatalf("stats %+v", s)
	}
}

// TestLinger: a partly filled assignment waits for more elements for
// Linger, then goes; elements of several announcements share one.
func TestLinger(t *testing.T) {
	clk := newClock()
	cfg := pushCfg()
	cfg.Linger = 5 * time.Millisecond
	m := newTestEM(t, cfg, clk)
	m.Join("a", 1)
	m.Credit(Credit{Epoch: 7, Incarnation: 1, BU: "a", Events: 1000, Bytes: 1 << 40})
	m.Announce(events(0, 4))
	m.Announce(events(6, 3)) // sparse ids: a gap at 4, 5
	if as := assigns(m.Outputs()); len(as) != 0 {
		t.Fatalf("assigned %v before linger", as)
	}
	m.Announce(events(9, 5)) // fills one assignment: 0-3, 6-11
	as := assigns(m.Outputs())
	want := []Range{{0, 4}, {6, 6}}
	if len(as) != 1 || !reflect.DeepEqual(as[0].Unit.Ranges, want) {
		t.Fatalf("assignments %+v, want one of %v", as, want)
	}
	clk.advance(4 * time.Millisecond)
	m.Tick()
	if as := assigns(m.Outputs()); len(as) != 0 {
		t.Fatalf("assigned %v before linger", as)
	}
	clk.advance(time.Millisecond)
	m.Tick()
	as = assigns(m.Outputs())
	if len(as) != 1 || !reflect.DeepEqual(as[0].Unit.Ranges, []Range{{12, 2}}) {
		t.Fatalf("after linger: %+v", as)
	}
	// A new resync cannot join the last assignment: the old one goes at once.
	m.Announce(events(20, 3))
	m.Announce(Unit{Run: 1, Resync: 1, Kind: UnitEvents, Ranges: []Range{{0, 2}}})
	as = assigns(m.Outputs())
	if len(as) != 1 || as[0].Unit.Resync != 0 || as[0].Unit.Len() != 3 {
		t.Fatalf("resync boundary: %+v", as)
	}
	m.Flush()
	as = assigns(m.Outputs())
	if len(as) != 1 || as[0].Unit.Resync != 1 {
		t.Fatalf("flush: %+v", as)
	}
}

// TestPullMaxOutstanding: a pull BU never has more than MaxOutstanding
// unreleased assignments, whatever its credit; assignments go to it only.
func TestPullMaxOutstanding(t *testing.T) {
	cfg := pushCfg()
	cfg.Protocol, cfg.MaxOutstanding = Pull, 2
	m := newTestEM(t, cfg, newClock())
	m.Join("a", 1)
	m.Announce(events(0, 100))
	m.Credit(Credit{Epoch: 7, Incarnation: 1, BU: "a", Events: 100, Bytes: 1 << 40})
	out := m.Outputs()
	as := assigns(out)
	if len(as) != 2 || out[0].ToRUs {
		t.Fatalf("pull assignments %+v", out)
	}
	m.Release(Release{Incarnation: 1, BU: "a", Entries: []ReleaseEntry{{Assignment: as[0].ID, Outcome: OutcomeDecided, Events: 10, Bytes: 100}}})
	if as2 := assigns(m.Outputs()); len(as2) != 1 || as2[0].ID != 3 {
		t.Fatalf("after one release: %+v", as2)
	}
}

// TestReassignOnDeath: a dead BU's unreleased assignments go to another BU
// under new ids naming the old ones, oldest first; its late releases are
// ignored; a rejoin under a new incarnation gets new work.
func TestReassignOnDeath(t *testing.T) {
	m := newTestEM(t, pushCfg(), newClock())
	m.Join("a", 1)
	m.Credit(Credit{Epoch: 7, Incarnation: 1, BU: "a", Events: 30, Bytes: 1 << 40})
	m.Announce(events(0, 30))
	first := assigns(m.Outputs())
	if len(first) != 3 {
		t.Fatalf("%d assignments", len(first))
	}
	// a built the first one, then died.
	m.Release(Release{Incarnation: 1, BU: "a", Entries: []ReleaseEntry{{Assignment: first[0].ID, Outcome: OutcomeDecided, Events: 10}}})
	m.Dead("a", 1)
	m.Join("b", 2)
	m.Credit(Credit{Epoch: 7, Incarnation: 2, BU: "b", Events: 100, Bytes: 1 << 40})
	re := assigns(m.Outputs())
	if len(re) != 2 {
		t.Fatalf("reassignments %+v", re)
	}
	for i, a := range re {
		old := first[i+1]
		if a.BU != "b" || a.Incarnation != 2 || a.Supersedes != old.ID || a.ID == old.ID || !reflect.DeepEqual(a.Unit, old.Unit) {
			t.Fatalf("reassignment %d = %+v, of %+v", i, a, old)
		}
	}
	// The dead incarnation's release is stale; so is its rejoin's release
	// of the superseded id.
	m.Release(Release{Incarnation: 1, BU: "a", Entries: []ReleaseEntry{{Assignment: first[1].ID, Outcome: OutcomeDecided}}})
	m.Join("a", 3)
	m.Release(Release{Incarnation: 3, BU: "a", Entries: []ReleaseEntry{{Assignment: first[1].ID, Outcome: OutcomeDecided}}})
	m.Release(Release{Incarnation: 3, BU: "a", Entries: []ReleaseEntry{{Assignment: re[0].ID, Outcome: OutcomeDecided}}})
	s := m.Stats()
	if s.StaleIncarnation != 1 || s.StaleAssignment != 1 || s.NotYours != 1 || s.Reassigned != 2 {
		t.Fatalf("stats %+v", s)
	}
	for _, a := range re {
		m.Release(Release{Incarnation: 2, BU: "b", Entries: []ReleaseEntry{{Assignment: a.ID, Outcome: OutcomeDurable, Events: 10}}})
	}
	l := m.Ledger().Summary()
	if !l.Balanced || l.Built != 30 || l.PerBU["a"] != 10 || l.PerBU["b"] != 20 {
		t.Fatalf("ledger %+v", l)
	}
}

// TestStaleEpoch: credits of an older epoch are ignored and counted; one of
// a newer epoch supersedes the EM, which stops assigning.
func TestStaleEpoch(t *testing.T) {
	m := newTestEM(t, pushCfg(), newClock())
	m.Join("a", 1)
	m.Announce(events(0, 10))
	m.Credit(Credit{Epoch: 6, Incarnation: 1, BU: "a", Events: 100})
	if len(assigns(m.Outputs())) != 0 || m.Stats().StaleEpoch != 1 {
		t.Fatalf("stale credit used: %+v", m.Stats())
	}
	m.Credit(Credit{Epoch: 8, Incarnation: 1, BU: "a", Events: 100})
	m.Credit(Credit{Epoch: 7, Incarnation: 1, BU: "a", Events: 100})
	if len(assigns(m.Outputs())) != 0 || !m.Stats().Superseded {
		t.Fatalf("superseded EM assigned: %+v", m.Stats())
	}
	m.Release(Release{Incarnation: 1, BU: "nobody", Entries: []ReleaseEntry{{Assignment: 1, Outcome: OutcomeDecided}}})
	if m.Stats().UnknownBU != 1 {
		t.Fatal("unknown BU not counted")
	}
}

// TestReleasePolicyReceived: under policy received a BU's assignment stops
// being reassignable once it reports received; if it dies before deciding,
// its elements are lost with a reason, never silently.
func TestReleasePolicyReceived(t *testing.T) {
	cfg := pushCfg()
	cfg.Release = OutcomeReceived
	m := newTestEM(t, cfg, newClock())
	m.Join("a", 1)
	m.Credit(Credit{Epoch: 7, Incarnation: 1, BU: "a", Events: 30, Bytes: 1 << 40})
	m.Announce(events(0, 30))
	as := assigns(m.Outputs())
	m.Release(Release{Incarnation: 1, BU: "a", Entries: []ReleaseEntry{
		{Assignment: as[0].ID, Outcome: OutcomeReceived}, {Assignment: as[1].ID, Outcome: OutcomeReceived},
		{Assignment: as[1].ID, Outcome: OutcomeDecided, Events: 10}}})
	if s := m.Stats(); s.Open != 1 || s.Undecided != 1 {
		t.Fatalf("stats %+v", s)
	}
	m.Dead("a", 1)
	m.Join("b", 2)
	m.Credit(Credit{Epoch: 7, Incarnation: 2, BU: "b", Events: 30, Bytes: 1 << 40})
	re := assigns(m.Outputs())
	if len(re) != 1 || re[0].Supersedes != as[2].ID {
		t.Fatalf("reassigned %+v, want only %d", re, as[2].ID)
	}
	m.Release(Release{Incarnation: 2, BU: "b", Entries: []ReleaseEntry{{Assignment: re[0].ID, Outcome: OutcomeDecided, Events: 10}}})
	l := m.Ledger().Summary()
	if !l.Balanced || l.Built != 20 || l.Lost[LostBUDeadAfterRelease] != 10 ||
		!reflect.DeepEqual(l.LostIDs[LostBUDeadAfterRelease], []KeyedRange{{Run: 1, Kind: UnitEvents, First: 0, N: 10}}) {
		t.Fatalf("ledger %+v", l)
	}
}

// TestBuiltEmpty: an assignment its BU built with no event at all (no
// RU's data reached it within its wait) is lost timed_out with its ids,
// not built: counted built, the ledger balanced while every store lacked
// the events.
func TestBuiltEmpty(t *testing.T) {
	m := newTestEM(t, pushCfg(), newClock())
	m.Join("a", 1)
	m.Credit(Credit{Epoch: 7, Incarnation: 1, BU: "a", Events: 20, Bytes: 1 << 40})
	m.Announce(events(0, 20))
	as := assigns(m.Outputs())
	m.Release(Release{Incarnation: 1, BU: "a", Entries: []ReleaseEntry{
		{Assignment: as[0].ID, Outcome: OutcomeDecided, Events: 10}, {Assignment: as[1].ID, Outcome: OutcomeDecided}}})
	l := m.Ledger().Summary()
	if !l.Balanced || l.Built != 10 || l.Events != 10 || l.Lost[LostTimedOut] != 10 || l.PerBU["a"] != 10 ||
		!reflect.DeepEqual(l.LostIDs[LostTimedOut], []KeyedRange{{Run: 1, Kind: UnitEvents, First: 10, N: 10}}) {
		t.Fatalf("ledger %+v", l)
	}
}

// TestBuiltPartlyEmpty: an assignment built with events for some of its
// ids only (no RU's data for the others): the ids the release names
// unbuilt are lost (timed_out), the rest built; a release naming ids
// outside its assignment is counted bad and taken as built.
func TestBuiltPartlyEmpty(t *testing.T) {
	m := newTestEM(t, pushCfg(), newClock())
	m.Join("a", 1)
	m.Credit(Credit{Epoch: 7, Incarnation: 1, BU: "a", Events: 20, Bytes: 1 << 40})
	m.Announce(events(0, 20))
	as := assigns(m.Outputs())
	m.Release(Release{Incarnation: 1, BU: "a", Entries: []ReleaseEntry{
		{Assignment: as[0].ID, Outcome: OutcomeDecided, Events: 7, Unbuilt: []Range{{First: 2, N: 1}, {First: 8, N: 2}}},
		{Assignment: as[1].ID, Outcome: OutcomeDecided, Events: 10, Unbuilt: []Range{{First: 30, N: 1}}}}})
	l := m.Ledger().Summary()
	if !l.Balanced || l.Built != 17 || l.Events != 17 || l.Lost[LostTimedOut] != 3 || l.PerBU["a"] != 17 ||
		!reflect.DeepEqual(l.LostIDs[LostTimedOut], []KeyedRange{{Run: 1, Kind: UnitEvents, First: 2, N: 1}, {Run: 1, Kind: UnitEvents, First: 8, N: 2}}) ||
		m.Stats().BadUnbuilt != 1 {
		t.Fatalf("ledger %+v, stats %+v", l, m.Stats())
	}
}

// TestReturnedAndDrain: a draining BU gets no more work; what it returns
// goes to another BU.
func TestReturnedAndDrain(t *testing.T) {
	m := newTestEM(t, pushCfg(), newClock())
	m.Join("a", 1)
	m.Join("b", 2)
	m.Credit(Credit{Epoch: 7, Incarnation: 1, BU: "a", Events: 20, Bytes: 1 << 40})
	m.Announce(events(0, 20))
	as := assigns(m.Outputs())
	m.Drain("a", 1)
	m.Credit(Credit{Epoch: 7, Incarnation: 1, BU: "a", Events: 20, Bytes: 1 << 40})
	m.Announce(events(20, 10))
	if len(assigns(m.Outputs())) != 0 {
		t.Fatal("draining BU got work")
	}
	m.Release(Release{Incarnation: 1, BU: "a", Entries: []ReleaseEntry{{Assignment: as[0].ID, Outcome: OutcomeDecided, Events: 10}, {Assignment: as[1].ID, Outcome: OutcomeReturned}}})
	m.Credit(Credit{Epoch: 7, Incarnation: 2, BU: "b", Events: 20, Bytes: 1 << 40})
	re := assigns(m.Outputs())
	if len(re) != 2 || re[0].Supersedes != as[1].ID || re[1].Supersedes != 0 || re[0].BU != "b" {
		t.Fatalf("after return: %+v", re)
	}
	if m.Stats().Returned != 1 {
		t.Fatal("return not counted")
	}
}

// TestReservation: the EM asks for ids below half a block, stops at the end
// of its ids, and refuses a block below one it had.
func TestReservation(t *testing.T) {
	cfg := pushCfg()
	cfg.BlockSize, cfg.AssignmentSize = 4, 1
	m := newTestEM(t, cfg, newClock())
	m.Join("a", 1)
	m.Credit(Credit{Epoch: 7, Incarnation: 1, BU: "a", Events: 100, Bytes: 1 << 40})
	m.Announce(events(0, 10))
	out := m.Outputs()
	if len(assigns(out)) != 4 {
		t.Fatalf("%d assignments with 4 ids", len(assigns(out)))
	}
	reserves := 0
	for _, o := range out {
		if o.Kind == OutReserve {
			reserves++
		}
	}
	if reserves != 1 || !m.Stats().NeedIDs {
		t.Fatalf("reserve requests %d (want 1), stats %+v", reserves, m.Stats())
	}
	if err := m.Reserved(Block{First: 3, End: 9}); err == nil {
		t.Fatal("overlapping block accepted")
	}
	if err := m.Reserved(Block{First: 100, End: 104}); err != nil {
		t.Fatal(err)
	}
	as := assigns(m.Outputs())
	if len(as) != 4 || as[0].ID != 100 || as[3].ID != 103 {
		t.Fatalf("after second block: %+v", as)
	}
}

// TestStop: queued elements at the end of the run are lost with a reason.
func TestStop(t *testing.T) {
	m := newTestEM(t, pushCfg(), newClock())
	m.Announce(events(0, 25))
	m.Stop()
	l := m.Ledger().Summary()
	if !l.Balanced || l.Lost[LostRunStopped] != 25 {
		t.Fatalf("ledger %+v", l)
	}
	if err := m.Announce(Unit{Kind: UnitEvents}); err == nil {
		t.Fatal("empty unit accepted")
	}
}

func TestQueueSplitAcrossRanges(t *testing.T) {
	var w workQueue
	now := time.Unix(0, 0)
	w.pushBack(Unit{Kind: UnitEvents, Ranges: []Range{{0, 3}, {10, 3}}}, now)
	w.pushBack(Unit{Kind: UnitEvents, Ranges: []Range{{13, 2}, {20, 1}}}, now) // 13 merges with 10-12
	n, ok := w.peek(4, now, time.Hour, false)
	if n != 4 || !ok {
		t.Fatalf("peek %d %v", n, ok)
	}
	u, _ := w.take(4)
	if !reflect.DeepEqual(u.Ranges, []Range{{0, 3}, {10, 1}}) {
		t.Fatalf("took %v", u.Ranges)
	}
	u, _ = w.take(4)
	if !reflect.DeepEqual(u.Ranges, []Range{{11, 4}}) {
		t.Fatalf("took %v", u.Ranges)
	}
	if n, ok := w.peek(4, now, time.Hour, false); n != 1 || ok {
		t.Fatalf("peek %d %v, want 1 waiting", n, ok)
	}
	w.pushFront(events(100, 7), 55, now)
	if n, ok := w.peek(4, now, time.Hour, false); n != 7 || !ok {
		t.Fatalf("reassignment peek %d %v, want whole 7", n, ok)
	}
	u, old := w.take(7)
	if old != 55 || u.Len() != 7 || w.elements != 1 {
		t.Fatalf("took %v old %d, %d left", u, old, w.elements)
	}
}

// TestReleasePolicyDurable: under policy durable a decided assignment is
// not built yet for the EM: if its BU dies before syncing, it is
// reassigned (the RUs still hold it).
func TestReleasePolicyDurable(t *testing.T) {
	cfg := pushCfg()
	cfg.Release = OutcomeDurable
	m := newTestEM(t, cfg, newClock())
	m.Join("a", 1)
	m.Credit(Credit{Epoch: 7, Incarnation: 1, BU: "a", Events: 20, Bytes: 1 << 40})
	m.Announce(events(0, 20))
	as := assigns(m.Outputs())
	m.Release(Release{Incarnation: 1, BU: "a", Entries: []ReleaseEntry{
		{Assignment: as[0].ID, Outcome: OutcomeDecided, Events: 10}, {Assignment: as[1].ID, Outcome: OutcomeDecided, Events: 10},
		{Assignment: as[1].ID, Outcome: OutcomeDurable, Events: 10}}})
	if s := m.Stats(); s.Settled != 1 || s.Open != 1 {
		t.Fatalf("stats %+v", s)
	}
	m.Dead("a", 1)
	m.Join("b", 2)
	m.Credit(Credit{Epoch: 7, Incarnation: 2, BU: "b", Events: 20, Bytes: 1 << 40})
	if re := assigns(m.Outputs()); len(re) != 1 || re[0].Supersedes != as[0].ID {
		t.Fatalf("reassigned %+v", re)
	}
}

// TestEarlyCredit: a credit from a BU whose membership the EM has not seen
// yet waits for its Join (of that incarnation only).
func TestEarlyCredit(t *testing.T) {
	m := newTestEM(t, pushCfg(), newClock())
	m.Announce(events(0, 20))
	m.Credit(Credit{Epoch: 7, Incarnation: 3, BU: "a", Events: 10, Bytes: 1 << 40})
	m.Credit(Credit{Epoch: 7, Incarnation: 3, BU: "a", Events: 10, Bytes: 1 << 40})
	m.Credit(Credit{Epoch: 7, Incarnation: 4, BU: "b", Events: 10, Bytes: 1 << 40})
	if len(assigns(m.Outputs())) != 0 {
		t.Fatal("assigned to a BU that has not joined")
	}
	m.Join("a", 3)
	m.Join("b", 5) // another incarnation than the credit's
	if as := assigns(m.Outputs()); len(as) != 2 || as[0].BU != "a" || as[1].BU != "a" || m.Stats().EarlyCredit != 1 {
		t.Fatalf("after joins: %+v %+v", as, m.Stats())
	}
}

// TestTakeover: a new EM waits for every party's inventory, adopts what a
// live BU holds (announcing it again to the RUs), carries over what was
// settled (relaying its release), drops re-announced elements it adopted,
// holds a release that comes during the takeover, and then assigns the
// rest; a party that stays silent is given up on after ReconcileWait.
func TestTakeover(t *testing.T) {
	cfg := pushCfg()
	cfg.ReconcileWait = 100 * time.Millisecond
	clk := newClock()
	m := newTestEM(t, cfg, clk)
	m.Join("a", 1)
	m.Join("b", 2)
	m.Reconcile([]string{"a", "b", "ru0", "ru1"})
	m.Credit(Credit{Epoch: 7, Incarnation: 2, BU: "b", Events: 100, Bytes: 1 << 40})
	m.Announce(events(0, 40)) // the trigger RU announcing again what it holds
	if out := assigns(m.Outputs()); len(out) != 0 {
		t.Fatalf("assigned during the takeover: %+v", out)
	}
	m.Inventory(Inventory{Epoch: 7, Incarnation: 1, Node: "a", Entries: []InventoryEntry{
		{ID: 5, Epoch: 6, Incarnation: 1, BU: "a", Unit: events(0, 10)},                           // in flight
		{ID: 6, Epoch: 6, Incarnation: 1, BU: "a", Reached: OutcomeDecided, Unit: events(10, 10)}, // settled
	}})
	m.Release(Release{Incarnation: 1, BU: "a", Entries: []ReleaseEntry{{Assignment: 5, Outcome: OutcomeDecided, Events: 10}}})
	m.Inventory(Inventory{Epoch: 6, Node: "ru0"}) // an older EM's: late
	m.Inventory(Inventory{Epoch: 7, Node: "ru0", Entries: []InventoryEntry{
		{ID: 4, Epoch: 6, Incarnation: 9, BU: "gone", Reached: OutcomeDecided, Unit: events(20, 5)}, // released, its BU gone
	}})
	m.Inventory(Inventory{Epoch: 7, Incarnation: 2, Node: "b"})
	if s := m.Stats(); !s.Reconciling || s.LateInventory != 1 {
		t.Fatalf("stats %+v", s)
	}
	clk.advance(100 * time.Millisecond) // ru1 never reports
	m.Tick()
	out := m.Outputs()
	var relays []ReleaseEntry
	for _, o := range out {
		if o.Kind == OutRelease {
			relays = append(relays, o.Release.Entries...)
		}
	}
	as := assigns(out)
	// 5 is announced again to the RUs; 25-39 are new work for b.
	if len(as) != 3 || as[0].ID != 5 || as[1].Unit.Ranges[0] != (Range{25, 10}) || as[2].Unit.Ranges[0] != (Range{35, 5}) || as[1].BU != "b" {
		t.Fatalf("assignments %+v", as)
	}
	ids := map[uint64]bool{}
	for _, e := range relays {
		ids[e.Assignment] = true
	}
	if !ids[4] || !ids[6] || !ids[5] {
		t.Fatalf("relays %+v: want 4 and 6 (carried over) and 5 (released during the takeover)", relays)
	}
	s := m.Stats()
	if s.Reconciling || s.Adopted != 1 || s.AdoptedSettled != 2 || s.SilentParties != 1 || s.DuplicateAnnounced != 25 {
		t.Fatalf("stats %+v", s)
	}
	for _, a := range as[1:] {
		m.Release(Release{Incarnation: 2, BU: "b", Entries: []ReleaseEntry{{Assignment: a.ID, Outcome: OutcomeDecided, Events: uint32(a.Unit.Len())}}})
	}
	l := m.Ledger().Summary()
	if !l.Balanced || l.Announced != 40 || l.Built != 40 || l.Carried != 15 || l.PerBU["gone"] != 5 {
		t.Fatalf("ledger %+v", l)
	}
}
