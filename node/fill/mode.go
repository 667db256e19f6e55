package fill

import (
	"fmt"
	"strings"
)

// Mode is an accelerator beam mode, spelt as the LHC's (upper case, words
// separated by one space): "STABLE BEAMS", "BEAM DUMP", "NO BEAM", ...
type Mode string

// The beam modes of the LHC. Only StableBeams is a fill for the planner:
// the detector takes physics data then. Every other mode is inter-fill
// time, in which deferred events are replayed.
const (
	Setup              Mode = "SETUP"
	InjectionProbeBeam Mode = "INJECTION PROBE BEAM"
	InjectionSetupBeam Mode = "INJECTION SETUP BEAM"
	InjectionPhysics   Mode = "INJECTION PHYSICS BEAM"
	PrepareRamp        Mode = "PREPARE RAMP"
	Ramp               Mode = "RAMP"
	FlatTop            Mode = "FLAT TOP"
	Squeeze            Mode = "SQUEEZE"
	Adjust             Mode = "ADJUST"
	StableBeams        Mode = "STABLE BEAMS"
	UnstableBeams      Mode = "UNSTABLE BEAMS"
	BeamDump           Mode = "BEAM DUMP"
	RampDown           Mode = "RAMP DOWN"
	Recovery           Mode = "RECOVERY"
	InjectAndDump      Mode = "INJECT AND DUMP"
	CirculateAndDump   Mode = "CIRCULATE AND DUMP"
	NoBeam             Mode = "NO BEAM"
	Cycling            Mode = "CYCLING"
	modeUnknown        Mode = ""
)

var modes = []Mode{Setup, InjectionProbeBeam, InjectionSetupBeam, InjectionPhysics, PrepareRamp, Ramp, FlatTop,
	Squeeze, Adjust, StableBeams, UnstableBeams, BeamDump, RampDown, Recovery, InjectAndDump, CirculateAndDump, NoBeam, Cycling}

// ParseMode reads a beam mode: case does not matter, and '_' or '-' may
// stand for the spaces ("stable_beams"). ErrUnknownMode names the modes
// known.
func ParseMode(s string) (Mode, error) {
	norm := strings.Join(strings.Fields(strings.NewReplacer("_", " ", "-", " ").Replace(strings.ToUpper(s))), " ")
	for _, m := range modes {
		if string(m) == norm {
			return m, nil
		}
	}
	names := make([]string, len(modes))
	for i, m := range modes {
		names[i] = string(m)
	}
	return modeUnknown, fmt.Errorf("%w %q: want one of %s", ErrUnknownMode, s, strings.Join(names, ", "))
}

// Beam says whether m is a fill: physics data arrive and deferral is
// planned for the inter-fill after it.
func (m Mode) Beam() bool { return m == StableBeams }
