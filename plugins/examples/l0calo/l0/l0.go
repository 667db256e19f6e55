// Package l0 is the decision logic of the l0calo example plugin: the LHCb
// level-0 hardware trigger's selections, applied to the emulator's
// detector-like payloads (internal/synth). An event is accepted when any of
// its four lines fires:
//
//	line 0 "muon":     a muon candidate with pT above muon_pt_mev (1400 MeV)
//	line 1 "dimuon":   the two highest-pT muon candidates with pT sum above
//	                   dimuon_sum_pt_mev (1300 MeV)
//	line 2 "hadron":   an HCAL tower with ET above hcal_et_mev (3500 MeV)
//	line 3 "electron": an ECAL tower with ET above ecal_et_mev (2500 MeV)
//
// and rejected otherwise. Thresholds are parameters, in MeV; the source
// groups holding the ECAL, HCAL and muon payloads are parameters too
// (ecal_group, hcal_group, muon_group; default "ecal", "hcal", "muon").
// An event with a malformed payload is deferred with the decoder's error.
package l0

import (
	"fmt"

	"github.com/sluice-daq/sluice/internal/synth"
	"github.com/sluice-daq/sluice/plugins/sdk"
	"github.com/sluice-daq/sluice/schemas"
)

// Trigger lines (bit numbers of the lines mask).
const (
	LineMuon = iota
	LineDimuon
	LineHadron
	LineElectron
)

// Thresholds are the cuts, in MeV.
type Thresholds struct {
	MuonPt, DimuonSumPt, HcalEt, EcalEt uint32
}

// DefaultThresholds are the LHCb level-0 values the example starts from.
var DefaultThresholds = Thresholds{MuonPt: 1400, DimuonSumPt: 1300, HcalEt: 3500, EcalEt: 2500}

// Trigger is the l0calo trigger. Use New.
type Trigger struct {
	cut              Thresholds
	ecal, hcal, muon string
}

// New returns the trigger with the default thresholds and group names.
func New() *Trigger {
	return &Trigger{cut: DefaultThresholds, ecal: "ecal", hcal: "hcal", muon: "muon"}
}

// Describe names the four lines and the three groups the trigger reads.
func (t *Trigger) Describe() sdk.Description {
	return sdk.Description{Name: "l0calo", Version: "1.0.0",
		Lines:   []string{"muon", "dimuon", "hadron", "electron"},
		Columns: []string{t.ecal, t.hcal, t.muon}}
}

// Configure reads thresholds (MeV) and group names.
func (t *Trigger) Configure(params map[string]string) error {
	if err := sdk.CheckParams(params, "muon_pt_mev", "dimuon_sum_pt_mev", "hcal_et_mev", "ecal_et_mev",
		"ecal_group", "hcal_group", "muon_group"); err != nil {
		return err
	}
	for _, p := range []struct {
		key string
		dst *uint32
		def uint32
	}{
		{"muon_pt_mev", &t.cut.MuonPt, DefaultThresholds.MuonPt},
		{"dimuon_sum_pt_mev", &t.cut.DimuonSumPt, DefaultThresholds.DimuonSumPt},
		{"hcal_et_mev", &t.cut.HcalEt, DefaultThresholds.HcalEt},
		{"ecal_et_mev", &t.cut.EcalEt, DefaultThresholds.EcalEt},
	} {
		v, err := sdk.ParamUint(params, p.key, uint64(p.def))
		if err != nil {
			return err
		}
		if v > 1<<32-1 {
			return fmt.Errorf("parameter %s: %d MeV is out of range", p.key, v)
		}
		*p.dst = uint32(v)
	}
	for _, g := range []struct {
		key string
		dst *string
	}{{"ecal_group", &t.ecal}, {"hcal_group", &t.hcal}, {"muon_group", &t.muon}} {
		if v, ok := params[g.key]; ok {
			*g.dst = v
		}
	}
	return nil
}

// Decide applies the four selections to every event.
func (t *Trigger) Decide(ev *schemas.EventBatch, out []schemas.Verdict) error {
	ecal, hcal, muon := ev.GroupIndex(t.ecal), ev.GroupIndex(t.hcal), ev.GroupIndex(t.muon)
	for i := range out {
		lines, err := t.event(ev, i, ecal, hcal, muon)
		switch {
		case err != nil:
			out[i] = sdk.Defer(fmt.Sprintf("l0calo: event %d: %v", ev.EventID(i), err))
		case lines != 0:
			out[i] = sdk.Accept(lines)
		default:
			out[i] = sdk.Reject()
		}
	}
	return nil
}

// event returns the lines that fire for row i; a group index of -1 (the
// batch lacks that group) contributes nothing.
func (t *Trigger) event(ev *schemas.EventBatch, i, ecal, hcal, muon int) (uint64, error) {
	var lines uint64
	var err error
	var maxEcal, maxHcal, pt1, pt2 uint32 // pt1 >= pt2: the two highest muon pT
	scan := func(g int, fn func(p synth.Payload)) {
		if g < 0 || err != nil {
			return
		}
		ev.Fragments(g, i, func(src uint32, payload []byte) bool {
			if len(payload) == 0 {
				return true // a missing source
			}
			p, e := synth.Decode(payload)
			if e != nil {
				err = fmt.Errorf("source %#x: %w", src, e)
				return false
			}
			fn(p)
			return true
		})
	}
	scan(ecal, func(p synth.Payload) {
		for k := 0; k < p.Count; k++ {
			_, et := p.Tower(k)
			maxEcal = max(maxEcal, et)
		}
	})
	scan(hcal, func(p synth.Payload) {
		for k := 0; k < p.Count; k++ {
			_, et := p.Tower(k)
			maxHcal = max(maxHcal, et)
		}
	})
	scan(muon, func(p synth.Payload) {
		for k := 0; k < p.Count; k++ {
			pt, _ := p.Muon(k)
			switch {
			case pt > pt1:
				pt1, pt2 = pt, pt1
			case pt > pt2:
				pt2 = pt
			}
		}
	})
	if err != nil {
		return 0, err
	}
	if pt1 > t.cut.MuonPt {
		lines |= 1 << LineMuon
	}
	if pt2 > 0 && uint64(pt1)+uint64(pt2) > uint64(t.cut.DimuonSumPt) {
		lines |= 1 << LineDimuon
	}
	if maxHcal > t.cut.HcalEt {
		lines |= 1 << LineHadron
	}
	if maxEcal > t.cut.EcalEt {
		lines |= 1 << LineElectron
	}
	return lines, nil
}
