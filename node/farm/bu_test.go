package farm

import (
	"reflect"
	"testing"
	"time"
)

func newTestBU(t *testing.T, clk Clock, proto Protocol, pol Outcome) *BU {
	t.Helper()
	b, err := NewBU(BUConfig{Node: "bu", Protocol: proto, Release: pol, ReleaseGroup: 2, ReleaseLinger: 5 * time.Millisecond,
		Slots: 100, SlotBytes: 1 << 20, Wait: 50 * time.Millisecond, Sources: []uint32{1, 2, 3, 4}}, 9, clk)
	if err != nil {
		t.Fatal(err)
	}
	b.RUJoin("ru1", []uint32{1, 2})
	b.RUJoin("ru2", []uint32{3, 4})
	return b
}

func kinds(out []BUOutput) (k []BUOutputKind) {
	for _, o := range out {
		k = append(k, o.Kind)
	}
	return
}

func final(id uint64) DataHeader {
	return DataHeader{Assignment: id, Incarnation: 9, PayloadBytes: 1000, Group: GroupMixed, Packets: 2, Flags: DataFinal}
}

// TestBUCredits: a new EM gets the BU's whole free capacity; assignments
// use it; an EM of a newer epoch gets what is free then.
func TestBUCredits(t *testing.T) {
	b := newTestBU(t, newClock(), Push, OutcomeDecided)
	b.Lead(3)
	out := b.Outputs()
	if len(out) != 1 || out[0].Credit != (Credit{Epoch: 3, Incarnation: 9, BU: "bu", Events: 100, Bytes: 1 << 20}) {
		t.Fatalf("first credit %+v", out)
	}
	b.Assign(Assign{Epoch: 3, ID: 1, Incarnation: 9, BU: "bu", Unit: events(0, 30)})
	b.Lead(2) // an older epoch: nothing
	b.Lead(5)
	out = b.Outputs()
	if len(out) != 1 || out[0].Credit.Epoch != 5 || out[0].Credit.Events != 70 {
		t.Fatalf("credit to the new EM %+v", out)
	}
	b.Assign(Assign{Epoch: 3, ID: 2, Incarnation: 9, BU: "bu", Unit: events(30, 10)})
	if b.Stats().OldEpoch != 1 || b.Stats().InFlight != 1 {
		t.Fatalf("deposed EM's assignment taken: %+v", b.Stats())
	}
}

// TestBUCompleteness: an assignment completes when every source's data is
// in (in any order, data possibly before the assignment), when an RU's
// final message says the rest of its sources will not come, at once when
// an RU dies (and for later assignments too), or after the wait; it is
// then released at the policy and its capacity credited back, releases
// grouped.
func TestBUCompleteness(t *testing.T) {
	clk := newClock()
	b := newTestBU(t, clk, Push, OutcomeDecided)
	b.Lead(1)
	b.Outputs()
	if !b.Data("ru2", final(1), []uint32{3, 4}) { // before its assignment
		t.Fatal("early data refused")
	}
	b.Assign(Assign{Epoch: 1, ID: 1, Incarnation: 9, BU: "bu", Unit: events(0, 10)})
	if k := kinds(b.Outputs()); len(k) != 0 {
		t.Fatalf("completed with ru1 missing: %v", k)
	}
	b.Data("ru1", DataHeader{Assignment: 1, Incarnation: 9, PayloadBytes: 500}, []uint32{1}) // not final
	if k := kinds(b.Outputs()); len(k) != 0 {
		t.Fatalf("completed with source 2 missing: %v", k)
	}
	b.Data("ru1", final(1), []uint32{2})
	out := b.Outputs()
	if len(out) != 1 || out[0].Kind != BUComplete || out[0].Assignment.ID != 1 || out[0].Missing != nil {
		t.Fatalf("complete %+v", out)
	}
	if b.Data("ru1", final(1), []uint32{1}) || b.Stats().LateData != 1 {
		t.Fatal("data after completion accepted")
	}
	// ru1's final message without source 2: it will not come.
	b.Assign(Assign{Epoch: 1, ID: 2, Incarnation: 9, BU: "bu", Unit: events(10, 10)})
	b.Data("ru1", final(2), []uint32{1})
	if k := kinds(b.Outputs()); len(k) != 0 {
		t.Fatalf("completed without ru2: %v", k)
	}
	// ru2 dies while assignment 2 waits for it.
	b.RUDead("ru2")
	out = b.Outputs()
	if len(out) != 1 || out[0].Kind != BUComplete || !reflect.DeepEqual(out[0].Missing, []uint32{2, 3, 4}) {
		t.Fatalf("after RU death %+v", out)
	}
	// Assignment 3 does not wait for the dead RU's sources; ru1 never
	// sends: the wait.
	b.Assign(Assign{Epoch: 1, ID: 3, Incarnation: 9, BU: "bu", Unit: events(20, 10)})
	clk.advance(49 * time.Millisecond)
	b.Tick()
	if k := kinds(b.Outputs()); len(k) != 0 {
		t.Fatalf("completed before the wait: %v", k)
	}
	clk.advance(time.Millisecond)
	b.Tick()
	out = b.Outputs()
	if len(out) != 1 || !reflect.DeepEqual(out[0].Missing, []uint32{1, 2, 3, 4}) || b.Stats().Incomplete != 2 {
		t.Fatalf("after the wait %+v %+v", out, b.Stats())
	}
	// ru2 back (a new incarnation): its sources are waited for again.
	b.RUJoin("ru2", []uint32{3, 4})
	b.Assign(Assign{Epoch: 1, ID: 4, Incarnation: 9, BU: "bu", Unit: events(30, 10)})
	b.Data("ru1", final(4), []uint32{1, 2})
	if k := kinds(b.Outputs()); len(k) != 0 {
		t.Fatalf("completed without the rejoined ru2: %v", k)
	}
	b.Data("ru2", final(4), []uint32{3, 4})
	if out = b.Outputs(); len(out) != 1 || out[0].Missing != nil {
		t.Fatalf("assignment 4: %+v", out)
	}
	// Stale data: another incarnation's.
	if b.Data("ru1", DataHeader{Assignment: 5, Incarnation: 8, Flags: DataFinal}, nil) || b.Stats().StaleData != 1 {
		t.Fatal("stale data accepted")
	}
	// Decisions: grouped by 2, with the freed capacity credited; the
	// ids without data the pipeline named go with the release.
	b.Unbuilt(1, []Range{{First: 3, N: 2}})
	b.Outcome(1, OutcomeDecided, 10)
	if k := kinds(b.Outputs()); len(k) != 0 {
		t.Fatalf("a group of 1 sent: %v", k)
	}
	b.Outcome(2, OutcomeDecided, 10)
	out = b.Outputs()
	if len(out) != 2 || out[0].Kind != BURelease || len(out[0].Release.Entries) != 2 ||
		!reflect.DeepEqual(out[0].Release.Entries[0], ReleaseEntry{Assignment: 1, Outcome: OutcomeDecided, Events: 10, Bytes: 2500, Unbuilt: []Range{{First: 3, N: 2}}}) ||
		out[1].Kind != BUCredit || out[1].Credit.Events != 20 {
		t.Fatalf("release %+v", out)
	}
	b.Outcome(3, OutcomeDecided, 10)
	b.Outcome(4, OutcomeDecided, 10)
	b.Outputs()
	b.Outcome(99, OutcomeDecided, 10)
	if b.Stats().Unknown != 1 {
		t.Fatal("outcome of an unknown id not counted")
	}
	b.Assign(Assign{Epoch: 1, ID: 5, Incarnation: 9, BU: "bu", Unit: events(40, 10)})
	b.Data("ru1", final(5), []uint32{1, 2})
	b.Data("ru2", final(5), []uint32{3, 4})
	b.Outputs()
	b.Outcome(5, OutcomeDecided, 10)
	clk.advance(5 * time.Millisecond)
	b.Tick()
	if out = b.Outputs(); len(out) != 2 || len(out[0].Release.Entries) != 1 {
		t.Fatalf("lingering release %+v", out)
	}
	if b.Data("ru1", final(1), nil) {
		t.Fatal("data of a settled assignment accepted")
	}
	b.Drain()
	if k := kinds(b.Outputs()); !reflect.DeepEqual(k, []BUOutputKind{BUDrained}) {
		t.Fatalf("drain %v", k)
	}
}

// TestBUMask: masked sources are not waited for, in flight or later, and
// an RU joining with a masked source does not bring them back.
func TestBUMask(t *testing.T) {
	clk := newClock()
	b := newTestBU(t, clk, Push, OutcomeDecided)
	b.Lead(1)
	b.Outputs()
	b.Assign(Assign{Epoch: 1, ID: 1, Incarnation: 9, BU: "bu", Unit: events(0, 10)})
	b.Data("ru1", final(1), []uint32{1, 2})
	b.Data("ru2", DataHeader{Assignment: 1, Incarnation: 9, PayloadBytes: 10}, []uint32{3}) // not final: 4 still due
	if k := kinds(b.Outputs()); len(k) != 0 {
		t.Fatalf("completed with source 4 due: %v", k)
	}
	b.Mask([]uint32{4})
	if out := b.Outputs(); len(out) != 1 || out[0].Kind != BUComplete || !reflect.DeepEqual(out[0].Missing, []uint32{4}) {
		t.Fatalf("after the mask %+v", out)
	}
	b.RUJoin("ru2", []uint32{3, 4}) // a new incarnation: 4 stays masked
	b.Assign(Assign{Epoch: 1, ID: 2, Incarnation: 9, BU: "bu", Unit: events(10, 10)})
	b.Data("ru1", final(2), []uint32{1, 2})
	b.Data("ru2", DataHeader{Assignment: 2, Incarnation: 9, PayloadBytes: 10}, []uint32{3})
	if out := b.Outputs(); len(out) != 1 || !reflect.DeepEqual(out[0].Missing, []uint32{4}) || b.Stats().Incomplete != 2 {
		t.Fatalf("assignment 2 after the mask %+v %+v", out, b.Stats())
	}
}

// TestBUPull: a pull BU requests each assignment from every RU it knows,
// and from an RU it learns of later when it still waits for its sources.
func TestBUPull(t *testing.T) {
	b := newTestBU(t, newClock(), Pull, OutcomeReceived)
	b.RUJoin("ru3", []uint32{9})
	b.Assign(Assign{Epoch: 1, ID: 4, Incarnation: 9, BU: "bu", Unit: events(90, 1)})
	b.Outputs()
	b.RUJoin("ru4", []uint32{4})
	if out := b.Outputs(); len(out) != 1 || out[0].Kind != BURequest || out[0].RU != "ru4" || out[0].Request.ID != 4 {
		t.Fatalf("late RU's requests %+v", out)
	}
	delete(b.rus, "ru3")
	delete(b.rus, "ru4")
	a := Assign{Epoch: 1, ID: 5, Incarnation: 9, BU: "bu", Unit: events(0, 10)}
	b.Assign(a)
	out := b.Outputs()
	if len(out) != 2 || out[0].Kind != BURequest || out[0].RU != "ru1" || out[1].RU != "ru2" || !reflect.DeepEqual(Assign(out[0].Request), a) {
		t.Fatalf("requests %+v", out)
	}
	// Policy received: the release goes when the data is in.
	b.Data("ru1", final(5), []uint32{1, 2})
	b.Data("ru2", final(5), []uint32{3, 4})
	b.Outcome(5, OutcomeDecided, 10)
	out = b.Outputs()
	if len(out) != 2 || out[1].Kind != BURelease || !reflect.DeepEqual(out[1].Release.Entries, []ReleaseEntry{
		{Assignment: 5, Outcome: OutcomeReceived, Bytes: 2000}, {Assignment: 5, Outcome: OutcomeDecided, Events: 10, Bytes: 2000}}) {
		t.Fatalf("outputs %+v", out)
	}
}

// requests lists the (assignment, RU) of the request outputs.
func requests(out []BUOutput) (r []reqKey) {
	for _, o := range out {
		if o.Kind == BURequest {
			r = append(r, reqKey{o.Request.ID, o.RU})
		}
	}
	return
}

// TestBURequestWindow: pull with MaxRequests 2 and three RUs keeps at most
// two requests outstanding over all assignments, oldest assignment first;
// an RU's final data, its death or the assignment's completion (by the
// wait) each make room for the next; a request whose assignment completed
// meanwhile is never sent. MaxRequests 0 asks every RU at once.
func TestBURequestWindow(t *testing.T) {
	clk := newClock()
	mk := func(maxReq int) *BU {
		b, err := NewBU(BUConfig{Node: "bu", Protocol: Pull, Release: OutcomeDecided, ReleaseGroup: 1, ReleaseLinger: time.Millisecond,
			Slots: 100, SlotBytes: 1 << 20, Wait: 50 * time.Millisecond, Sources: []uint32{1, 2, 3}, MaxRequests: maxReq}, 9, clk)
		if err != nil {
			t.Fatal(err)
		}
		for i, ru := range []string{"ru1", "ru2", "ru3"} {
			b.RUJoin(ru, []uint32{uint32(i + 1)})
		}
		b.Lead(1)
		b.Outputs()
		return b
	}
	want := func(b *BU, step string, w ...reqKey) {
		t.Helper()
		if got := requests(b.Outputs()); !reflect.DeepEqual(got, w) {
			t.Fatalf("%s: requests %v, want %v", step, got, w)
		}
		if b.cfg.MaxRequests > 0 && len(b.reqOut) > b.cfg.MaxRequests {
			t.Fatalf("%s: %d outstanding", step, len(b.reqOut))
		}
	}
	b := mk(2)
	b.Assign(Assign{Epoch: 1, ID: 1, Incarnation: 9, BU: "bu", Unit: events(0, 1)})
	want(b, "first assignment", reqKey{1, "ru1"}, reqKey{1, "ru2"})
	b.Assign(Assign{Epoch: 1, ID: 2, Incarnation: 9, BU: "bu", Unit: events(1, 1)})
	want(b, "second assignment, window full")
	b.Data("ru1", DataHeader{Assignment: 1, Incarnation: 9, PayloadBytes: 10}, []uint32{1}) // not final
	want(b, "partial data")
	b.Data("ru1", final(1), nil)
	want(b, "ru1 answered", reqKey{1, "ru3"})
	b.RUDead("ru2")
	want(b, "ru2 died", reqKey{2, "ru1"})
	b.Data("ru3", final(1), []uint32{3})
	// Assignment 1 is complete (ru2 dead); ru3 answered: room for two,
	// but assignment 2's ru2 request is gone with ru2.
	want(b, "assignment 1 complete", reqKey{2, "ru3"})
	// Assignment 2 completes by the wait: its requests are no longer
	// outstanding, and a third one is asked of both live RUs.
	clk.advance(60 * time.Millisecond)
	b.Tick()
	b.Assign(Assign{Epoch: 1, ID: 3, Incarnation: 9, BU: "bu", Unit: events(2, 1)})
	want(b, "after the wait", reqKey{3, "ru1"}, reqKey{3, "ru3"})

	u := mk(0)
	u.Assign(Assign{Epoch: 1, ID: 1, Incarnation: 9, BU: "bu", Unit: events(0, 1)})
	u.Assign(Assign{Epoch: 1, ID: 2, Incarnation: 9, BU: "bu", Unit: events(1, 1)})
	want(u, "no window", reqKey{1, "ru1"}, reqKey{1, "ru2"}, reqKey{1, "ru3"}, reqKey{2, "ru1"}, reqKey{2, "ru2"}, reqKey{2, "ru3"})
}

// TestBUWaitsForLiveRU: past its wait an assignment waits on for the
// final data of a live RU (the RU decides what it sends without), up to
// FinalWait; not for a dead RU's sources nor for sources no live RU reads.
func TestBUWaitsForLiveRU(t *testing.T) {
	clk := newClock()
	b, err := NewBU(BUConfig{Node: "bu", Protocol: Push, Release: OutcomeDecided, ReleaseGroup: 1, ReleaseLinger: time.Millisecond,
		Slots: 100, SlotBytes: 1 << 20, Wait: 50 * time.Millisecond, FinalWait: 200 * time.Millisecond, Sources: []uint32{1, 2, 3, 4}}, 9, clk)
	if err != nil {
		t.Fatal(err)
	}
	b.RUJoin("ru1", []uint32{1, 2})
	b.RUJoin("ru2", []uint32{3, 4})
	b.Lead(1)
	step := func(d time.Duration) []BUOutput {
		clk.advance(d)
		b.Tick()
		var c []BUOutput
		for _, o := range b.Outputs() {
			if o.Kind == BUComplete {
				c = append(c, o)
			}
		}
		return c
	}
	as := func(id uint64) Assign {
		return Assign{Epoch: 1, ID: id, Incarnation: 9, BU: "bu", Unit: events(10*id, 10)}
	}
	b.Assign(as(1))
	b.Data("ru1", final(1), []uint32{1, 2})
	if c := step(150 * time.Millisecond); len(c) != 0 {
		t.Fatalf("built without live ru2's final data: %+v", c)
	}
	b.Data("ru2", final(1), []uint32{3, 4})
	if c := b.Outputs(); len(c) == 0 || c[0].Kind != BUComplete || c[0].Missing != nil {
		t.Fatalf("assignment 1: %+v", c)
	}
	// ru2 dies while assignment 2 waits for it: built at once without it.
	b.Assign(as(2))
	b.Data("ru1", final(2), []uint32{1, 2})
	if c := step(100 * time.Millisecond); len(c) != 0 {
		t.Fatalf("built without live ru2's final data: %+v", c)
	}
	b.RUDead("ru2")
	if c := b.Outputs(); len(c) == 0 || c[0].Kind != BUComplete || !reflect.DeepEqual(c[0].Missing, []uint32{3, 4}) {
		t.Fatalf("assignment 2 after ru2 died: %+v", c)
	}
	// Sources no live RU reads: the wait.
	b.Assign(as(3))
	b.Data("ru1", final(3), []uint32{1, 2})
	if c := step(50 * time.Millisecond); len(c) != 1 || !reflect.DeepEqual(c[0].Missing, []uint32{3, 4}) {
		t.Fatalf("assignment 3 at the wait: %+v", c)
	}
	// A live RU that never sends its final data: FinalWait.
	b.RUJoin("ru2", []uint32{3, 4})
	b.Assign(as(4))
	b.Data("ru2", final(4), []uint32{3, 4})
	b.Data("ru1", DataHeader{Assignment: 4, Incarnation: 9, PayloadBytes: 10}, []uint32{1})
	if c := step(199 * time.Millisecond); len(c) != 0 {
		t.Fatalf("built before FinalWait: %+v", c)
	}
	if c := step(time.Millisecond); len(c) != 1 || !reflect.DeepEqual(c[0].Missing, []uint32{2}) {
		t.Fatalf("assignment 4 at FinalWait: %+v", c)
	}
	if st := b.Stats(); st.WaitedFinal != 3 || st.FinalTimedOut != 1 || st.Incomplete != 3 {
		t.Fatalf("stats %+v: want 3 waited for a final, 1 timed out, 3 incomplete", st)
	}
}
