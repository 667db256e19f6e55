package farm

import (
	"testing"
	"time"
)

// TestByteCredits: a BU whose payload capacity (SlotBytes) is the bound,
// not its event slots, gets no more work than its bytes allow. The BU
// credits its whole free capacity to a new EM, then the bytes each
// settled assignment freed (increments, like event credit); the EM
// charges each assignment an estimate from the bytes per event settled so
// far and puts the estimate right when the assignment settles. Once the
// estimate is known the EM keeps at most SlotBytes / assignment bytes
// assignments open at the BU (event credit would allow ten), counting the
// waits; when everything is built the byte credit it holds is the BU's
// whole capacity again, to the byte, and the event credit too.
func TestByteCredits(t *testing.T) {
	const (
		slotBytes = 1_000_000
		perRU     = 150_000 // payload bytes of one assignment from each of the two RUs
	)
	clk := newClock()
	m := newTestEM(t, pushCfg(), clk)
	bu, err := NewBU(BUConfig{Node: "bu", Protocol: Push, Release: OutcomeDecided, ReleaseGroup: 1,
		Slots: 100, SlotBytes: slotBytes, Wait: time.Second, Sources: []uint32{1, 2}}, 9, clk)
	if err != nil {
		t.Fatal(err)
	}
	bu.RUJoin("ru1", []uint32{1})
	bu.RUJoin("ru2", []uint32{2})
	m.Join("bu", 9)
	var inFlight []Assign // assigned, oldest first
	route := func() {
		for moved := true; moved; {
			moved = false
			for _, o := range m.Outputs() {
				if o.Kind == OutAssign {
					moved = true
					bu.Assign(o.Assign)
					inFlight = append(inFlight, o.Assign)
				}
			}
			for _, o := range bu.Outputs() {
				switch o.Kind {
				case BUCredit:
					moved = true
					m.Credit(o.Credit)
				case BURelease:
					moved = true
					m.Release(o.Release)
				case BUComplete:
					// Built and decided at once: every event.
					bu.Outcome(o.Assignment.ID, OutcomeDecided, uint32(o.Assignment.Unit.Len()))
					moved = true
				}
			}
		}
	}
	bu.Lead(7)
	route()
	if s := m.Stats(); s.CreditBytes["bu"] != slotBytes || s.Credits["bu"] != 100 {
		t.Fatalf("first credit: %d bytes, %d events; want the whole capacity", s.CreditBytes["bu"], s.Credits["bu"])
	}
	if err := m.Announce(events(0, 300)); err != nil {
		t.Fatal(err)
	}
	route()
	// No bytes are known before the first settles: event credit alone
	// bounds the first assignments.
	if n := len(inFlight); n != 10 {
		t.Fatalf("%d assignments before any bytes were known, want 10 (event credit)", n)
	}
	maxOpen, built := 0, 0
	for len(inFlight) > 0 {
		a := inFlight[0]
		inFlight = inFlight[1:]
		for i, ru := range []string{"ru1", "ru2"} {
			bu.Data(ru, DataHeader{Assignment: a.ID, Incarnation: 9, PayloadBytes: perRU, Group: GroupMixed, Packets: 1, Flags: DataFinal},
				[]uint32{uint32(i + 1)})
		}
		route()
		built += a.Unit.Len()
		if built > 100 { // the first ten (event credit) are settled by then
			maxOpen = max(maxOpen, m.Stats().OpenPerBU["bu"])
		}
	}
	if want := slotBytes / (2 * perRU); maxOpen != want {
		t.Fatalf("at most %d assignments open once their bytes were known, want %d (byte credit)", maxOpen, want)
	}
	s := m.Stats()
	if s.ByteLimited == 0 {
		t.Fatalf("no wait for byte credit counted: %+v", s)
	}
	if s.CreditBytes["bu"] != slotBytes || s.Credits["bu"] != 100 || s.Open != 0 {
		t.Fatalf("nothing in flight: byte credit %d (want %d), event credit %d (want 100), open %d",
			s.CreditBytes["bu"], slotBytes, s.Credits["bu"], s.Open)
	}
	if l := m.Ledger().Summary(); !l.Balanced || l.Built != 300 {
		t.Fatalf("ledger %s", l)
	}
}

// TestByteCreditOversized: an assignment larger than a BU's whole byte
// capacity still goes to it when it holds nothing (it would never go out
// otherwise), one at a time.
func TestByteCreditOversized(t *testing.T) {
	m := newTestEM(t, pushCfg(), newClock())
	m.Join("a", 1)
	m.Credit(Credit{Epoch: 7, Incarnation: 1, BU: "a", Events: 100, Bytes: 1000})
	if err := m.Announce(events(0, 10)); err != nil {
		t.Fatal(err)
	}
	as := assigns(m.Outputs())
	// Its release says 5000 bytes: 500 per event from now on.
	m.Release(Release{Incarnation: 1, BU: "a", Entries: []ReleaseEntry{{Assignment: as[0].ID, Outcome: OutcomeDecided, Events: 10, Bytes: 5000}}})
	m.Outputs()
	m.Credit(Credit{Epoch: 7, Incarnation: 1, BU: "a", Events: 10, Bytes: 5000})
	if err := m.Announce(events(10, 30)); err != nil {
		t.Fatal(err)
	}
	if as := assigns(m.Outputs()); len(as) != 1 {
		t.Fatalf("%d assignments of 5000 bytes to a BU with 1000 bytes of credit, want one (it held nothing)", len(as))
	}
	if s := m.Stats(); s.CreditBytes["a"] != 1000-5000 || s.ByteLimited == 0 {
		t.Fatalf("byte credit %d, waits %d", s.CreditBytes["a"], s.ByteLimited)
	}
}
