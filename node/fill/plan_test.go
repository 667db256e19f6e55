package fill

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

func testConfig() Config {
	c := DefaultConfig()
	c.Safety, c.MaxFraction, c.Poll = 0.5, 0.9, time.Second
	return c
}

// inFill is a fill ending in rem with an inter-fill of gap after it; the
// node replays 10 events/s, sees 10 events/s of 1000 bytes, accepts half,
// and the store has room to spare.
func inFill(rem, gap time.Duration) Inputs {
	return Inputs{Now: t0, State: State{Mode: StableBeams, Fill: 9001, Since: t0.Add(-time.Hour), Until: t0.Add(rem), NextFill: t0.Add(rem + gap)},
		ReplayRate: 10, EventRate: 10, EventBytes: 1000, AcceptShare: 0.5, HeadroomBytes: 1 << 40, Configured: 0.3}
}

func TestPlan(t *testing.T) {
	cases := []struct {
		name     string
		cfg      func(*Config)
		in       func(*Inputs)
		fraction float64
		reason   Reason
		clamped  string
	}{
		// 100 s of fill bring 1000 events; the 100 s inter-fill replays
		// 10 × 100 × 0.5 = 500 of them.
		{name: "inter-fill binds", fraction: 0.5, reason: ReasonInterFill},
		{name: "a longer inter-fill absorbs more", in: func(in *Inputs) { in.State.NextFill = in.State.Until.Add(160 * time.Second) }, fraction: 0.8, reason: ReasonInterFill},
		{name: "a long inter-fill: max fraction", in: func(in *Inputs) { in.State.NextFill = in.State.Until.Add(time.Hour) }, fraction: 0.9, reason: ReasonMaxFraction, clamped: "max"},
		{name: "the backlog already fills the inter-fill", in: func(in *Inputs) { in.BacklogEvents = 600 }, fraction: 0, reason: ReasonInterFill, clamped: "min"},
		{name: "backlog takes part of it", in: func(in *Inputs) { in.BacklogEvents = 200 }, fraction: 0.3, reason: ReasonInterFill},
		{name: "other deferrals take part of it", in: func(in *Inputs) { in.OtherDeferRate = 2 }, fraction: 0.3, reason: ReasonInterFill},
		{name: "min fraction holds", cfg: func(c *Config) { c.MinFraction = 0.1 }, in: func(in *Inputs) { in.BacklogEvents = 600 }, fraction: 0.1, reason: ReasonInterFill, clamped: "min"},
		// 1000 events × 1000 bytes to come; 0.8 × 750000 = 600000 bytes
		// hold them at f + 0.5 (1-f) = 0.6: f = 0.2.
		{name: "store budget binds", in: func(in *Inputs) { in.HeadroomBytes = 750000 }, fraction: 0.2, reason: ReasonStoreBudget},
		{name: "store full", in: func(in *Inputs) { in.HeadroomBytes = 0 }, fraction: 0, reason: ReasonStoreBudget, clamped: "min"},
		{name: "everything accepted: the store budget is not deferral's", in: func(in *Inputs) { in.HeadroomBytes = 10 << 20; in.AcceptShare = 1 }, fraction: 0.5, reason: ReasonInterFill},
		// 0.8 × 250000 - 100000 bytes left for 1000 events of 1000 bytes.
		{name: "backlog budget binds", cfg: func(c *Config) { c.MaxBacklogBytes = 250000 }, in: func(in *Inputs) { in.BacklogBytes = 100000 }, fraction: 0.1, reason: ReasonBacklogBudget},
		{name: "backlog budget spent", cfg: func(c *Config) { c.MaxBacklogBytes = 200000 }, in: func(in *Inputs) { in.BacklogBytes = 300000 }, fraction: 0, reason: ReasonBacklogBudget, clamped: "min"},
		// No end known: expected_fill 10h from the start an hour ago, and
		// the expected inter-fill of 2h: 10 × 7200 × 0.5 = 36000 of 324000.
		{name: "no end known", in: func(in *Inputs) { in.State.Until, in.State.NextFill = time.Time{}, time.Time{} }, fraction: 36000.0 / 324000, reason: ReasonInterFill},
		{name: "no start or end known", in: func(in *Inputs) { in.State = State{Mode: StableBeams} }, fraction: 36000.0 / 360000, reason: ReasonInterFill},
		{name: "beam off", in: func(in *Inputs) {
			in.State = State{Mode: BeamDump, Since: t0.Add(-time.Minute), Until: t0.Add(time.Hour), NextFill: t0.Add(time.Hour)}
			in.BacklogEvents = 100
		}, fraction: 0, reason: ReasonBeamOff},
		{name: "beam off, min fraction", cfg: func(c *Config) { c.MinFraction = 0.05 }, in: func(in *Inputs) { in.State = State{Mode: NoBeam} }, fraction: 0.05, reason: ReasonBeamOff},
		{name: "unknown state", in: func(in *Inputs) { in.State = State{} }, fraction: 0.3, reason: ReasonUnknownState},
		{name: "unknown state, configured above max", in: func(in *Inputs) { in.State, in.Configured = State{}, 1 }, fraction: 0.9, reason: ReasonUnknownState, clamped: "max"},
		{name: "replay rate not measured", in: func(in *Inputs) { in.ReplayRate = 0 }, fraction: 0.3, reason: ReasonNotMeasured},
		{name: "event rate not measured", in: func(in *Inputs) { in.EventRate = 0 }, fraction: 0.3, reason: ReasonNotMeasured},
		{name: "event size not measured", in: func(in *Inputs) { in.EventBytes = 0 }, fraction: 0.3, reason: ReasonNotMeasured},
		// The fill's end is past: one poll is left (the plan is made
		// again then): 10 events to come, the inter-fill takes 500.
		{name: "fill overdue", in: func(in *Inputs) { in.State.Until = t0.Add(-time.Second); in.State.NextFill = t0.Add(time.Minute) }, fraction: 0.9, reason: ReasonMaxFraction, clamped: "max"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			if tc.cfg != nil {
				tc.cfg(&c)
			}
			in := inFill(100*time.Second, 100*time.Second)
			if tc.in != nil {
				tc.in(&in)
			}
			p := c.Plan(in)
			if math.Abs(p.Fraction-tc.fraction) > 1e-9 || p.Reason != tc.reason || p.Clamped != tc.clamped {
				t.Fatalf("fraction %v reason %s clamped %q, want %v %s %q (%s)", p.Fraction, p.Reason, p.Clamped, tc.fraction, tc.reason, tc.clamped, p.Detail)
			}
			if p.Detail == "" {
				t.Fatal("no detail")
			}
		})
	}
}

// TestPlanFigures: the plan's figures for /status.
func TestPlanFigures(t *testing.T) {
	c := testConfig()
	in := inFill(100*time.Second, 50*time.Second)
	in.BacklogEvents, in.BacklogBytes = 40, 40000
	p := c.Plan(in)
	if p.FillRemainingSeconds != 100 || p.InterFillSeconds != 50 || p.NextFillSeconds != 150 || p.ReplaySeconds != 4 ||
		p.CapacityEvents != 250 || p.BacklogEvents != 40 || p.BacklogBytes != 40000 || !p.Beam || p.Mode != StableBeams || p.Fill != 9001 {
		t.Fatalf("%+v", p)
	}
	off := c.Plan(Inputs{Now: t0, State: State{Mode: BeamDump, Since: t0.Add(-10 * time.Second)}, BacklogEvents: 30, ReplayRate: 10})
	// No next fill known: the expected inter-fill (2h) from its start.
	if off.Beam || off.NextFillSeconds != 7190 || off.ReplaySeconds != 3 || off.FillRemainingSeconds != 0 {
		t.Fatalf("%+v", off)
	}
}

// TestPlanMonotone: the longer the coming inter-fill, the more is
// deferred; the bigger the backlog, the less.
func TestPlanMonotone(t *testing.T) {
	c := testConfig()
	prev := -1.0
	for gap := 0 * time.Second; gap <= 400*time.Second; gap += 20 * time.Second {
		f := c.Plan(inFill(100*time.Second, gap)).Fraction
		if f < prev {
			t.Fatalf("gap %s: fraction %v after %v for a shorter one", gap, f, prev)
		}
		prev = f
	}
	if prev != c.MaxFraction {
		t.Fatalf("a long inter-fill plans %v, want max %v", prev, c.MaxFraction)
	}
	prev = 2
	for b := uint64(0); b <= 800; b += 50 {
		in := inFill(100*time.Second, 100*time.Second)
		in.BacklogEvents = b
		f := c.Plan(in).Fraction
		if f > prev {
			t.Fatalf("backlog %d: fraction %v after %v for a smaller one", b, f, prev)
		}
		prev = f
	}
}
