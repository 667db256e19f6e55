// Package gec is the decision logic of the gec example plugin: a global
// event cut on LHCb raw data. Busy events (many hits in the tracking
// detectors) take the most time to reconstruct and are the least useful, so
// LHCb cuts on the detector occupancy before anything else. The plugin sums,
// per event, the payload bytes of the raw banks of the configured bank types
// (parameter bank_types, default "64,66": FTCluster (SciFi) and UT, the
// numbering of LHCb's RawBank::BankType) and compares the sum with
// max_bytes (default 10000):
//
//	line 0 "quiet": sum <= max_bytes: accepted
//	line 1 "busy":  sum >  max_bytes: rejected, or accepted on this line when
//	                keep_busy=true (so that the host's prescale of line busy
//	                keeps a sample of busy events)
//
// Sources follow schemas/lhcb's splitter: sluice source id = bank type<<16 |
// LHCb source id, and a fragment holds all of that source's raw banks of the
// event (8-byte bank headers included). A fragment whose banks do not decode
// defers its event with the decoder's error.
package gec

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sluice-daq/sluice/plugins/sdk"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/lhcb"
)

// Trigger lines.
const (
	LineQuiet = iota
	LineBusy
)

// Default parameters.
const (
	DefaultBankTypes = "64,66"
	DefaultMaxBytes  = 10000
)

// Trigger is the gec trigger. Use New.
type Trigger struct {
	types    [256]bool
	maxBytes uint64
	keepBusy bool
	banks    []lhcb.Bank // reused
}

// New returns the trigger with the default parameters.
func New() *Trigger {
	t := &Trigger{maxBytes: DefaultMaxBytes}
	if err := t.setTypes(DefaultBankTypes); err != nil {
		panic(err) // the default is a constant
	}
	return t
}

// Describe names the two lines; the trigger reads every group (it picks
// sources by their bank type, whatever their group).
func (t *Trigger) Describe() sdk.Description {
	return sdk.Description{Name: "gec", Version: "1.0.0", Lines: []string{"quiet", "busy"}}
}

// Configure reads bank_types (comma-separated bank types, 0-255), max_bytes
// and keep_busy.
func (t *Trigger) Configure(params map[string]string) error {
	if err := sdk.CheckParams(params, "bank_types", "max_bytes", "keep_busy"); err != nil {
		return err
	}
	if s, ok := params["bank_types"]; ok {
		if err := t.setTypes(s); err != nil {
			return err
		}
	}
	var err error
	if t.maxBytes, err = sdk.ParamUint(params, "max_bytes", DefaultMaxBytes); err != nil {
		return err
	}
	if s, ok := params["keep_busy"]; ok {
		if t.keepBusy, err = strconv.ParseBool(s); err != nil {
			return fmt.Errorf("parameter keep_busy: %q is not true or false", s)
		}
	}
	return nil
}

func (t *Trigger) setTypes(s string) error {
	t.types = [256]bool{}
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(f), 0, 8)
		if err != nil {
			return fmt.Errorf("parameter bank_types: %q is not a bank type (0-255)", f)
		}
		t.types[v] = true
	}
	return nil
}

// Decide cuts every event on the summed bank payload bytes.
func (t *Trigger) Decide(ev *schemas.EventBatch, out []schemas.Verdict) error {
	groups := t.groups(ev)
	for i := range out {
		sum, err := t.occupancy(ev, groups, i)
		switch {
		case err != nil:
			out[i] = sdk.Defer(fmt.Sprintf("gec: event %d: %v", ev.EventID(i), err))
		case sum <= t.maxBytes:
			out[i] = sdk.Accept(1 << LineQuiet)
		case t.keepBusy:
			out[i] = sdk.Accept(1 << LineBusy)
		default:
			out[i] = sdk.Reject()
		}
	}
	return nil
}

// Occupancy returns the payload bytes of the raw banks of the configured
// types in row i.
func (t *Trigger) Occupancy(ev *schemas.EventBatch, i int) (uint64, error) {
	return t.occupancy(ev, t.groups(ev), i)
}

// groups returns the indices of the groups holding a source of a
// configured bank type.
func (t *Trigger) groups(ev *schemas.EventBatch) []int {
	var out []int
	for g, grp := range ev.Groups {
		for _, src := range grp.Sources {
			if typ, _, ok := lhcb.SplitSourceID(src); ok && t.types[typ] {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

func (t *Trigger) occupancy(ev *schemas.EventBatch, groups []int, i int) (uint64, error) {
	var sum uint64
	var err error
	for _, g := range groups {
		ev.Fragments(g, i, func(src uint32, payload []byte) bool {
			typ, _, ok := lhcb.SplitSourceID(src)
			if !ok || !t.types[typ] || len(payload) == 0 {
				return true
			}
			if t.banks, err = lhcb.AppendBanks(t.banks[:0], payload); err != nil {
				err = fmt.Errorf("source %#x: %w", src, err)
				return false
			}
			for k := range t.banks {
				sum += uint64(len(t.banks[k].Data))
			}
			return true
		})
		if err != nil {
			return 0, err
		}
	}
	return sum, nil
}
