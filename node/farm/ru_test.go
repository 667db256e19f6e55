package farm

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

var key1 = UnitKey{Run: 1, Kind: UnitEvents}

func pkt(source uint32, first uint64, n uint32) *Packet {
	return &Packet{Key: key1, Source: source, First: first, N: n, Bytes: int(n) * 100, Handle: fmt.Sprintf("s%d@%d", source, first)}
}

func asg(id uint64, bu string, inc uint64, first uint64, n uint32) Assign {
	return Assign{Epoch: 1, ID: id, Incarnation: inc, BU: bu, Unit: events(first, n)}
}

func newTestRU(t *testing.T, clk Clock, pol Outcome, sources ...uint32) *RU {
	t.Helper()
	r, err := NewRU(RUConfig{Sources: sources, Release: pol, Wait: 10 * time.Millisecond}, clk)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func sends(out []RUOutput) (s []RUOutput) {
	for _, o := range out {
		if o.Kind == RUSend {
			s = append(s, o)
		}
	}
	return
}

func frees(out []RUOutput) (f []string) {
	for _, o := range out {
		if o.Kind == RUFree {
			f = append(f, o.Packet.Handle.(string))
		}
	}
	return
}

// TestRUPushHoldAndRelease: an assignment announced before its data goes
// once every source's data is in; its bytes stay until the BU reports the
// run's release outcome.
func TestRUPushHoldAndRelease(t *testing.T) {
	r := newTestRU(t, newClock(), OutcomeDecided, 1, 2)
	r.Assign(asg(10, "bu", 5, 0, 4))
	r.Add(pkt(1, 0, 4))
	if s := sends(r.Outputs()); len(s) != 0 {
		t.Fatalf("sent before source 2's data: %+v", s)
	}
	r.Add(pkt(2, 0, 2))
	r.Add(pkt(2, 2, 2))
	s := sends(r.Outputs())
	if len(s) != 1 || s[0].BU != "bu" || s[0].Header.Assignment != 10 || s[0].Header.Incarnation != 5 ||
		s[0].Header.Packets != 3 || s[0].Header.PayloadBytes != 800 || s[0].Header.Flags != DataFinal {
		t.Fatalf("send %+v", s)
	}
	if got := s[0].Packets; got[0].Source != 1 || got[1].First != 0 || got[2].First != 2 {
		t.Fatalf("packet order %v", got)
	}
	if st := r.Stats(); st.BytesPerBU["bu"] != 800 || st.Held != 3 {
		t.Fatalf("stats %+v", st)
	}
	r.Release(Release{Incarnation: 5, BU: "bu", Entries: []ReleaseEntry{{Assignment: 10, Outcome: OutcomeReceived}}})
	if f := frees(r.Outputs()); len(f) != 0 {
		t.Fatalf("freed at received under policy decided: %v", f)
	}
	r.Release(Release{Incarnation: 4, BU: "bu", Entries: []ReleaseEntry{{Assignment: 10, Outcome: OutcomeDecided}}})
	if f := frees(r.Outputs()); len(f) != 0 || r.Stats().Stale != 1 {
		t.Fatalf("stale incarnation's release freed %v", f)
	}
	r.Release(Release{Incarnation: 5, BU: "bu", Entries: []ReleaseEntry{{Assignment: 10, Outcome: OutcomeDecided}}})
	if f := frees(r.Outputs()); len(f) != 3 {
		t.Fatalf("freed %v, want all 3", f)
	}
	if st := r.Stats(); st.Held != 0 || st.HeldBytes != 0 || len(st.BytesPerBU) != 0 {
		t.Fatalf("stats after release %+v", st)
	}
}

// TestRUOverlapPacket: a packet whose events belong to two assignments is
// sent to both and freed only when both released it.
func TestRUOverlapPacket(t *testing.T) {
	r := newTestRU(t, newClock(), OutcomeReceived, 1)
	r.Add(pkt(1, 0, 10))
	r.Assign(asg(1, "a", 1, 0, 5))
	r.Assign(asg(2, "b", 2, 5, 5))
	if s := sends(r.Outputs()); len(s) != 2 || s[0].Packets[0] != s[1].Packets[0] {
		t.Fatalf("sends %+v", s)
	}
	r.Release(Release{Incarnation: 1, BU: "a", Entries: []ReleaseEntry{{Assignment: 1, Outcome: OutcomeReceived}}})
	if f := frees(r.Outputs()); len(f) != 0 {
		t.Fatalf("freed while b holds it: %v", f)
	}
	r.Release(Release{Incarnation: 2, BU: "b", Entries: []ReleaseEntry{{Assignment: 2, Outcome: OutcomeDurable}}})
	if f := frees(r.Outputs()); len(f) != 1 {
		t.Fatalf("freed %v", f)
	}
}

// TestRUPartlyAssignedPacket: a packet is kept while some of its elements
// were never assigned (the next assignment will need it).
func TestRUPartlyAssignedPacket(t *testing.T) {
	r := newTestRU(t, newClock(), OutcomeReceived, 1)
	r.Add(pkt(1, 0, 10))
	r.Assign(asg(1, "a", 1, 0, 5))
	r.Release(Release{Incarnation: 1, BU: "a", Entries: []ReleaseEntry{{Assignment: 1, Outcome: OutcomeReceived}}})
	if f := frees(r.Outputs()); len(f) != 0 {
		t.Fatalf("freed a packet half of which is unassigned: %v", f)
	}
	r.Stop()
	if f := frees(r.Outputs()); len(f) != 1 {
		t.Fatalf("stop freed %v", f)
	}
}

// TestRUReassignment: the reassignment of a dead BU's assignment is sent
// to the new BU from the bytes still held; the dead BU's release is stale.
func TestRUReassignment(t *testing.T) {
	r := newTestRU(t, newClock(), OutcomeDecided, 1, 2)
	r.Add(pkt(1, 0, 4))
	r.Add(pkt(2, 0, 4))
	r.Assign(asg(1, "a", 1, 0, 4))
	first := sends(r.Outputs())
	re := asg(7, "b", 2, 0, 4)
	re.Supersedes = 1
	r.Assign(re)
	second := sends(r.Outputs())
	if len(first) != 1 || len(second) != 1 || second[0].BU != "b" || second[0].Header.Assignment != 7 ||
		second[0].Packets[0] != first[0].Packets[0] || second[0].Packets[1] != first[0].Packets[1] {
		t.Fatalf("first %+v second %+v", first, second)
	}
	if st := r.Stats(); st.BytesPerBU["a"] != 0 || st.BytesPerBU["b"] != 800 {
		t.Fatalf("bytes per BU %v", st.BytesPerBU)
	}
	r.Release(Release{Incarnation: 1, BU: "a", Entries: []ReleaseEntry{{Assignment: 1, Outcome: OutcomeDecided}}})
	if f := frees(r.Outputs()); len(f) != 0 || r.Stats().Stale != 1 {
		t.Fatalf("dead BU's release freed %v", f)
	}
	r.Assign(re) // repeated announcement by a new EM
	if s := sends(r.Outputs()); len(s) != 0 {
		t.Fatalf("repeated assignment sent again: %+v", s)
	}
	r.Release(Release{Incarnation: 2, BU: "b", Entries: []ReleaseEntry{{Assignment: 7, Outcome: OutcomeDecided}}})
	if f := frees(r.Outputs()); len(f) != 2 {
		t.Fatalf("freed %v", f)
	}
}

// TestRUMissingData: an assignment whose data of one source does not come
// goes after Wait, flagged, counted by source; the late packet is counted
// and freed rather than held forever.
func TestRUMissingData(t *testing.T) {
	clk := newClock()
	r := newTestRU(t, clk, OutcomeDecided, 1, 2)
	r.Assign(asg(1, "a", 1, 0, 4))
	r.Add(pkt(1, 0, 4))
	clk.advance(9 * time.Millisecond)
	r.Tick()
	if s := sends(r.Outputs()); len(s) != 0 {
		t.Fatal("sent before the wait")
	}
	clk.advance(time.Millisecond)
	r.Tick()
	s := sends(r.Outputs())
	if len(s) != 1 || s[0].Header.Flags != DataFinal|DataMissing || r.Stats().Missing[2] != 4 {
		t.Fatalf("send %+v stats %+v", s, r.Stats())
	}
	r.Add(pkt(2, 0, 4))
	if f := frees(r.Outputs()); len(f) != 1 || r.Stats().Late != 1 {
		t.Fatalf("late packet: freed %v, stats %+v", f, r.Stats())
	}
	if err := r.Add(pkt(1, 2, 4)); err == nil || r.Stats().Duplicate != 1 {
		t.Fatal("overlapping packet accepted")
	}
	if err := r.Add(pkt(3, 0, 1)); err == nil {
		t.Fatal("packet of a foreign source accepted")
	}
}

// TestRULateAfterRelease: a readout behind the others sends its packets
// after the assignment went without them and its BU released it (the
// events built without this source): the packets are late, counted and
// freed at once — held, they kept a stopped node from ever finishing —
// while a packet reaching past the released elements stays for the
// assignment of the rest.
func TestRULateAfterRelease(t *testing.T) {
	clk := newClock()
	r := newTestRU(t, clk, OutcomeDecided, 1, 2)
	r.Assign(asg(1, "a", 1, 0, 4))
	r.Add(pkt(1, 0, 4))
	clk.advance(10 * time.Millisecond)
	r.Tick()
	if s := sends(r.Outputs()); len(s) != 1 || s[0].Header.Flags&DataMissing == 0 {
		t.Fatalf("send %+v", s)
	}
	r.Release(Release{Incarnation: 1, BU: "a", Entries: []ReleaseEntry{{Assignment: 1, Outcome: OutcomeDecided}}})
	if f := frees(r.Outputs()); len(f) != 1 || f[0] != "s1@0" {
		t.Fatalf("release freed %v", f)
	}
	r.Add(pkt(2, 0, 2))
	r.Add(pkt(2, 2, 4)) // 2-3 released, 4-5 not yet assigned
	if f := frees(r.Outputs()); len(f) != 1 || f[0] != "s2@0" {
		t.Fatalf("late packets: freed %v, want s2@0", f)
	}
	if st := r.Stats(); st.Late != 2 || st.Held != 1 || st.HeldBytes != 400 {
		t.Fatalf("stats %+v", st)
	}
	r.Assign(asg(2, "a", 1, 4, 2))
	r.Add(pkt(1, 4, 2))
	if s := sends(r.Outputs()); len(s) != 1 || s[0].Header.Packets != 2 || s[0].Header.Flags&DataMissing != 0 {
		t.Fatalf("send of the rest %+v", s)
	}
	r.Release(Release{Incarnation: 1, BU: "a", Entries: []ReleaseEntry{{Assignment: 2, Outcome: OutcomeDecided}}})
	if f := frees(r.Outputs()); len(f) != 2 || r.Stats().Held != 0 {
		t.Fatalf("freed %v, stats %+v", f, r.Stats())
	}
}

// TestRUEnd: the RU holding the trigger source ends the space with the
// elements it named; another RU, whose readout read further, frees the
// packets of the elements never named at once (and those that come
// later), counted by source, and keeps those an assignment holds.
func TestRUEnd(t *testing.T) {
	trig, err := NewRU(RUConfig{Sources: []uint32{1}, Release: OutcomeDecided, Wait: time.Second, Names: true, TriggerSource: 1}, newClock())
	if err != nil {
		t.Fatal(err)
	}
	trig.Add(pkt(1, 0, 2))
	trig.Add(pkt(1, 3, 2))
	if !trig.Names(key1) {
		t.Fatal("the trigger RU names nothing before its end")
	}
	e := trig.EndOf(key1)
	if want := []Span{{0, 1}, {3, 4}}; !reflect.DeepEqual(e.Named, want) || e.Key != key1 {
		t.Fatalf("end %+v, want named %v", e, want)
	}
	trig.Add(pkt(1, 5, 1))
	if trig.Names(key1) {
		t.Fatal("the trigger RU still names after its end")
	}
	trig.End(e) // its own, back: the packet after the end was never named
	if f := frees(trig.Outputs()); len(f) != 1 || f[0] != "s1@5" || trig.Stats().NeverAnnounced[1] != 1 {
		t.Fatalf("trigger RU freed %v, stats %+v", f, trig.Stats())
	}

	clk := newClock()
	r := newTestRU(t, clk, OutcomeDecided, 2)
	r.Add(pkt(2, 0, 4)) // 0-1 and 3 named, 2 not
	r.Add(pkt(2, 4, 4)) // 4 named
	r.Add(pkt(2, 8, 4)) // none named
	r.Assign(asg(1, "a", 1, 0, 2))
	if s := sends(r.Outputs()); len(s) != 1 {
		t.Fatalf("send %+v", s)
	}
	r.End(e)
	if f := frees(r.Outputs()); len(f) != 1 || f[0] != "s2@8" {
		t.Fatalf("end freed %v, want s2@8", f)
	}
	if st := r.Stats(); st.NeverAnnounced[2] != 1+3+4 || st.Held != 2 {
		t.Fatalf("stats %+v", st)
	}
	r.End(End{Key: key1}) // repeated: ignored
	r.Add(pkt(2, 20, 3))
	if f := frees(r.Outputs()); len(f) != 1 || f[0] != "s2@20" || r.Stats().NeverAnnounced[2] != 11 {
		t.Fatalf("later packet: freed %v, stats %+v", f, r.Stats())
	}
	r.Release(Release{Incarnation: 1, BU: "a", Entries: []ReleaseEntry{{Assignment: 1, Outcome: OutcomeDecided}}})
	r.Assign(asg(2, "a", 1, 3, 2))
	r.Release(Release{Incarnation: 1, BU: "a", Entries: []ReleaseEntry{{Assignment: 2, Outcome: OutcomeDecided}}})
	if f := frees(r.Outputs()); len(f) != 2 || r.Stats().Held != 0 {
		t.Fatalf("freed %v, stats %+v", f, r.Stats())
	}
}

// TestRUProperty: random packets (sources in any order, sizes not aligned
// to assignments), assignments of consecutive elements, reassignments and
// releases: a packet is never freed while an unreleased assignment that
// was sent it holds it, and at the end everything is freed exactly once.
func TestRUProperty(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		clk := newClock()
		r := newTestRU(t, clk, OutcomeDecided, 1, 2, 3)
		freed := map[*Packet]bool{}
		holders := map[*Packet]map[uint64]bool{} // packet → sent assignments not released
		live := map[uint64]Assign{}
		var next [4]uint64
		var assigned uint64
		nextID := uint64(1)
		total := 0
		drain := func() {
			for _, o := range r.Outputs() {
				switch o.Kind {
				case RUSend:
					for _, p := range o.Packets {
						if freed[p] {
							t.Fatalf("seed %d: freed packet %v sent", seed, p.Handle)
						}
						if holders[p] == nil {
							holders[p] = map[uint64]bool{}
						}
						holders[p][o.Header.Assignment] = true
					}
				case RUFree:
					if freed[o.Packet] {
						t.Fatalf("seed %d: %v freed twice", seed, o.Packet.Handle)
					}
					if len(holders[o.Packet]) > 0 {
						t.Fatalf("seed %d: %v freed while assignments %v hold it", seed, o.Packet.Handle, holders[o.Packet])
					}
					freed[o.Packet] = true
				}
			}
		}
		release := func(id uint64) {
			a := live[id]
			delete(live, id)
			r.Release(Release{Incarnation: a.Incarnation, BU: a.BU, Entries: []ReleaseEntry{{Assignment: id, Outcome: OutcomeDecided}}})
			for _, hs := range holders {
				delete(hs, id)
			}
			drain()
		}
		for step := 0; step < 400; step++ {
			switch x := rng.IntN(10); {
			case x < 4:
				s := uint32(1 + rng.IntN(3))
				n := uint32(1 + rng.IntN(7))
				if err := r.Add(pkt(s, next[s], n)); err != nil {
					t.Fatal(err)
				}
				next[s] += uint64(n)
				total++
			case x < 6:
				n := uint32(1 + rng.IntN(5))
				a := asg(nextID, fmt.Sprintf("bu%d", rng.IntN(3)), uint64(rng.IntN(3)), assigned, n)
				nextID++
				assigned += uint64(n)
				live[a.ID] = a
				r.Assign(a)
			case x < 7 && len(live) > 0:
				// Reassign the oldest live assignment (its BU died).
				var old uint64 = 1 << 62
				for id := range live {
					old = min(old, id)
				}
				a := live[old]
				delete(live, old)
				for _, hs := range holders {
					delete(hs, old)
				}
				a.ID, a.Supersedes, a.BU, a.Incarnation = nextID, old, "bu9", 9
				nextID++
				live[a.ID] = a
				r.Assign(a)
			case x < 9 && len(live) > 0:
				ids := make([]uint64, 0, len(live))
				for id := range live {
					ids = append(ids, id)
				}
				release(ids[rng.IntN(len(ids))])
			default:
				clk.advance(time.Duration(rng.IntN(6)) * time.Millisecond)
				r.Tick()
			}
			drain()
		}
		// The end: elements up to the furthest data are assigned, every
		// assignment goes and is released, the run stops.
		far := max(next[1], next[2], next[3])
		if far > assigned {
			a := asg(nextID, "bu0", 0, assigned, uint32(far-assigned))
			live[a.ID] = a
			r.Assign(a)
		}
		clk.advance(time.Second)
		r.Tick()
		drain()
		for id := range live {
			release(id)
		}
		r.Stop()
		drain()
		if len(freed) != total || r.Stats().Held != 0 {
			t.Fatalf("seed %d: freed %d of %d packets, %d held", seed, len(freed), total, r.Stats().Held)
		}
	}
}

// TestRUBehind: past its wait an assignment waits on for a source of the
// RU that is behind it (no packet reaching its last element yet) and
// still sending (a packet within BehindWait; before its first one, since
// the RU started: a readout starting late), up to BehindLimit; not for a
// source that paused longer, one already past it (it lost those
// elements), nor once the readout ended.
func TestRUBehind(t *testing.T) {
	clk := newClock()
	r, err := NewRU(RUConfig{Sources: []uint32{1, 2}, Release: OutcomeDecided, Wait: 10 * time.Millisecond,
		BehindWait: 50 * time.Millisecond, BehindLimit: 200 * time.Millisecond}, clk)
	if err != nil {
		t.Fatal(err)
	}
	step := func(d time.Duration) []RUOutput { clk.advance(d); r.Tick(); return sends(r.Outputs()) }
	r.Assign(asg(1, "a", 1, 0, 4))
	r.Assign(asg(2, "a", 1, 4, 4))
	r.Add(pkt(1, 0, 4))
	r.Add(pkt(1, 4, 4))
	// Source 2 has sent nothing yet: behind, and started 30 ms ago.
	if s := step(30 * time.Millisecond); len(s) != 0 {
		t.Fatalf("sent while source 2 had not started: %+v", s)
	}
	r.Add(pkt(2, 0, 4))
	if s := sends(r.Outputs()); len(s) != 1 || s[0].Header.Assignment != 1 || s[0].Header.Flags != DataFinal {
		t.Fatalf("assignment 1 once source 2 came: %+v", s)
	}
	// Source 2 reached 3 of 4-7, 40 ms ago: still sending.
	if s := step(40 * time.Millisecond); len(s) != 0 {
		t.Fatalf("sent while source 2 was behind and sending: %+v", s)
	}
	// 60 ms silent: taken for stopped.
	s := step(20 * time.Millisecond)
	if len(s) != 1 || s[0].Header.Assignment != 2 || s[0].Header.Flags != DataFinal|DataMissing || r.Stats().Missing[2] != 4 {
		t.Fatalf("assignment 2 after source 2 paused: %+v %+v", s, r.Stats())
	}
	// Source 2 past the assignment (it lost 8-11): no waiting.
	r.Assign(asg(3, "a", 1, 8, 4))
	r.Add(pkt(1, 8, 4))
	r.Add(pkt(2, 12, 4))
	if s := step(10 * time.Millisecond); len(s) != 1 || s[0].Header.Assignment != 3 || s[0].Header.Flags&DataMissing == 0 {
		t.Fatalf("assignment 3 with source 2 past it: %+v", s)
	}
	// A source sending, but too slowly to reach the assignment within
	// BehindLimit.
	r.Assign(asg(4, "a", 1, 100, 4))
	r.Add(pkt(1, 100, 4))
	next := uint64(16)
	for i := 0; i < 9; i++ {
		r.Add(pkt(2, next, 4))
		next += 4
		if s := step(20 * time.Millisecond); len(s) != 0 {
			t.Fatalf("sent at %d ms while source 2 was behind and sending: %+v", 20*(i+1), s)
		}
	}
	r.Add(pkt(2, next, 4))
	if s := step(20 * time.Millisecond); len(s) != 1 || s[0].Header.Assignment != 4 {
		t.Fatalf("assignment 4 at its behind limit: %+v", s)
	}
	// Source 2 sends in the next space (its counter reset): it is past
	// every element of this one.
	r.Assign(asg(6, "a", 1, 300, 4))
	r.Add(pkt(1, 300, 4))
	reset := pkt(2, 0, 4)
	reset.Key.Resync = 1
	r.Add(reset)
	if s := step(10 * time.Millisecond); len(s) != 1 || s[0].Header.Assignment != 6 || s[0].Header.Flags&DataMissing == 0 {
		t.Fatalf("assignment 6 with source 2 sending after a reset: %+v", s)
	}
	// The readout ended: what waits for a source behind goes now.
	r.Assign(asg(5, "a", 1, 200, 4))
	r.Add(pkt(1, 200, 4))
	r.Add(pkt(2, next+4, 4))
	if s := step(15 * time.Millisecond); len(s) != 0 {
		t.Fatalf("sent while source 2 was behind and sending: %+v", s)
	}
	r.ReadoutEnded()
	if s := sends(r.Outputs()); len(s) != 1 || s[0].Header.Assignment != 5 {
		t.Fatalf("assignment 5 after the readout ended: %+v", s)
	}
	if st := r.Stats(); st.WaitedBehind != 4 {
		t.Fatalf("waited behind %d, want 4 (assignments 1, 2, 4, 5): %+v", st.WaitedBehind, st)
	}
}
