package l0

import (
	"encoding/binary"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/internal/synth"
	"github.com/sluice-daq/sluice/plugins/internal/synthbatch"
	"github.com/sluice-daq/sluice/schemas"
)

// payload writes a synthetic payload (internal/synth layout) holding the
// given records: (tower id, ET) for calorimeters, (pT, charge) for muons.
func payload(kind synth.Kind, src uint32, recs ...[2]uint32) []byte {
	p := make([]byte, synth.HeaderSize+synth.RecordSize*len(recs))
	p[0], p[1] = byte(kind), synth.Version
	binary.LittleEndian.PutUint16(p[2:], uint16(len(recs)))
	binary.LittleEndian.PutUint32(p[4:], src)
	for i, r := range recs {
		rec := p[synth.HeaderSize+synth.RecordSize*i:]
		if kind == synth.KindMuon {
			binary.LittleEndian.PutUint32(rec, r[0])
			rec[4] = byte(r[1])
		} else {
			binary.LittleEndian.PutUint16(rec, uint16(r[0]))
			binary.LittleEndian.PutUint32(rec[4:], r[1])
		}
	}
	return p
}

// event makes an event of the default groups (4 ECAL, 2 HCAL, 4 muon
// sources) whose sources hold nothing except the payloads given by source.
func event(id uint64, set map[uint32][]byte) synthbatch.Event {
	groups := synth.DefaultGroups()
	ev := synthbatch.Event{ID: id, Fragments: make([][][]byte, len(groups))}
	for gi, g := range groups {
		ev.Fragments[gi] = make([][]byte, len(g.Sources))
		for k, src := range g.Sources {
			p, ok := set[src]
			if !ok {
				p = payload(synth.KindOf(g.Name), src)
			}
			ev.Fragments[gi][k] = p
		}
	}
	return ev
}

func decide(t *testing.T, tr *Trigger, events []synthbatch.Event) []schemas.Verdict {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec, err := synthbatch.Build(mem, synth.DefaultGroups(), events)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	ev, err := schemas.NewEventBatch(rec)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]schemas.Verdict, ev.Len())
	if err := tr.Decide(ev, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestThresholds checks each line at and just above its threshold.
func TestThresholds(t *testing.T) {
	const ecal, hcal, mu0, mu1 = 0x100, 0x201, 0x300, 0x303
	cases := []struct {
		name  string
		set   map[uint32][]byte
		want  schemas.Decision
		lines uint64
	}{
		{"empty", nil, schemas.DecisionReject, 0},
		{"ecal at threshold", map[uint32][]byte{ecal: payload(synth.KindECAL, ecal, [2]uint32{1, 2500})}, schemas.DecisionReject, 0},
		{"ecal above", map[uint32][]byte{ecal: payload(synth.KindECAL, ecal, [2]uint32{1, 100}, [2]uint32{2, 2501})}, schemas.DecisionAccept, 1 << LineElectron},
		{"hcal at threshold", map[uint32][]byte{hcal: payload(synth.KindHCAL, hcal, [2]uint32{1, 3500})}, schemas.DecisionReject, 0},
		{"hcal above", map[uint32][]byte{hcal: payload(synth.KindHCAL, hcal, [2]uint32{7, 3501})}, schemas.DecisionAccept, 1 << LineHadron},
		{"ecal-sized tower in hcal", map[uint32][]byte{hcal: payload(synth.KindHCAL, hcal, [2]uint32{7, 3000})}, schemas.DecisionReject, 0},
		{"single muon above", map[uint32][]byte{mu0: payload(synth.KindMuon, mu0, [2]uint32{1401, 1})}, schemas.DecisionAccept, 1 << LineMuon},
		{"single muon at threshold", map[uint32][]byte{mu0: payload(synth.KindMuon, mu0, [2]uint32{1400, 1})}, schemas.DecisionReject, 0},
		{"dimuon across sources", map[uint32][]byte{
			mu0: payload(synth.KindMuon, mu0, [2]uint32{700, 1}),
			mu1: payload(synth.KindMuon, mu1, [2]uint32{100, 0xFF}, [2]uint32{650, 0xFF}),
		}, schemas.DecisionAccept, 1 << LineDimuon},
		{"dimuon sum at threshold", map[uint32][]byte{mu0: payload(synth.KindMuon, mu0, [2]uint32{700, 1}, [2]uint32{600, 1})}, schemas.DecisionReject, 0},
		{"muon and dimuon and electron", map[uint32][]byte{
			mu0:  payload(synth.KindMuon, mu0, [2]uint32{1500, 1}, [2]uint32{200, 1}),
			ecal: payload(synth.KindECAL, ecal, [2]uint32{3, 8000}),
		}, schemas.DecisionAccept, 1<<LineMuon | 1<<LineDimuon | 1<<LineElectron},
		{"missing source", map[uint32][]byte{mu0: nil}, schemas.DecisionReject, 0},
		{"malformed muon payload", map[uint32][]byte{mu0: {3, 1, 9, 0, 0, 0, 0, 0}}, schemas.DecisionDefer, 0},
	}
	var events []synthbatch.Event
	for i, c := range cases {
		events = append(events, event(uint64(i), c.set))
	}
	out := decide(t, New(), events)
	for i, c := range cases {
		if out[i].Decision != c.want || out[i].Lines != c.lines {
			t.Errorf("%s: %v lines %04b, want %v lines %04b (%s)", c.name, out[i].Decision, out[i].Lines, c.want, c.lines, out[i].Reason.Text)
		}
	}
	if out[len(cases)-1].Reason.Text == "" {
		t.Error("deferred event has no reason")
	}
}

// TestConfigure checks that thresholds are parameters and bad ones fail.
func TestConfigure(t *testing.T) {
	tr := New()
	if err := tr.Configure(map[string]string{"ecal_et_mev": "9000", "muon_pt_mev": "100"}); err != nil {
		t.Fatal(err)
	}
	out := decide(t, tr, []synthbatch.Event{
		event(1, map[uint32][]byte{0x100: payload(synth.KindECAL, 0x100, [2]uint32{1, 8000})}),
		event(2, map[uint32][]byte{0x301: payload(synth.KindMuon, 0x301, [2]uint32{101, 1})}),
	})
	if out[0].Decision != schemas.DecisionReject || out[1].Lines != 1<<LineMuon {
		t.Fatalf("configured thresholds not applied: %+v", out)
	}
	for _, bad := range []map[string]string{{"ecal_et_mev": "x"}, {"ecal_et": "1"}, {"hcal_et_mev": "99999999999"}} {
		if err := New().Configure(bad); err == nil {
			t.Errorf("Configure(%v) accepted", bad)
		}
	}
}

// TestEmulatedRates runs the default thresholds on 4000 emulated events
// (seed 7) and checks the line counts against an independent scan of the
// same payloads, and that they are what the generator's spectra give.
func TestEmulatedRates(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	const n = 4000
	rec, err := synthbatch.Synthetic(mem, synthbatch.Spec{Events: n, FragmentSize: 64, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	ev, _ := schemas.NewEventBatch(rec)
	out := make([]schemas.Verdict, n)
	if err := New().Decide(ev, out); err != nil {
		t.Fatal(err)
	}
	var got, want [4]int
	accepted := 0
	for i := 0; i < n; i++ {
		// Independent scan: regenerate each source's payload.
		var maxE, maxH uint32
		var pts []uint32
		for _, g := range synth.DefaultGroups() {
			for _, src := range g.Sources {
				p, err := synth.Decode(synth.Append(nil, synth.KindOf(g.Name), 7, uint64(i), src, 64))
				if err != nil {
					t.Fatal(err)
				}
				for k := 0; k < p.Count; k++ {
					switch p.Kind {
					case synth.KindECAL:
						_, et := p.Tower(k)
						maxE = max(maxE, et)
					case synth.KindHCAL:
						_, et := p.Tower(k)
						maxH = max(maxH, et)
					case synth.KindMuon:
						pt, _ := p.Muon(k)
						pts = append(pts, pt)
					}
				}
			}
		}
		var m1, m2 uint32
		for _, pt := range pts {
			if pt > m1 {
				m1, m2 = pt, m1
			} else if pt > m2 {
				m2 = pt
			}
		}
		fire := [4]bool{m1 > 1400, m2 > 0 && m1+m2 > 1300, maxH > 3500, maxE > 2500}
		any := false
		for l, f := range fire {
			if f {
				want[l]++
				any = true
			}
			if out[i].Lines&(1<<l) != 0 {
				got[l]++
			}
		}
		if any != (out[i].Decision == schemas.DecisionAccept) {
			t.Fatalf("event %d: %v, independent scan says lines %v", i, out[i].Decision, fire)
		}
		if any {
			accepted++
		}
	}
	if got != want {
		t.Fatalf("line counts %v, independent scan %v", got, want)
	}
	// Hard towers (2–8 GeV) come in 2 % of calorimeter fragments: 4 ECAL
	// sources give ~8 % of events a hard ECAL tower, ~5/6 of them above
	// 2.5 GeV; 2 HCAL sources ~4 %, 3/4 of them above 3.5 GeV.
	if got[LineElectron] < n*4/100 || got[LineElectron] > n*10/100 || got[LineHadron] < n*1/100 || got[LineHadron] > n*5/100 {
		t.Fatalf("line counts %v out of 4000 are not what the generator's spectra give", got)
	}
	t.Logf("4000 emulated events: accepted %d; lines muon %d dimuon %d hadron %d electron %d", accepted, got[0], got[1], got[2], got[3])
}
