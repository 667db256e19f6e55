package fill

import (
	"fmt"
	"math"
	"time"
)

// Inputs is what the planner knows at one moment: the accelerator's state
// and the node's measurements. Rates and sizes of 0 are not measured yet.
type Inputs struct {
	Now   time.Time
	State State
	// BacklogEvents and BacklogBytes are the deferred stream now.
	BacklogEvents uint64
	BacklogBytes  int64
	// EventBytes is the mean stored size of an event (bytes).
	EventBytes float64
	// ReplayRate is the events per second replay sustains (measured, at
	// most replay.rate).
	ReplayRate float64
	// EventRate is the events per second the planned stage sees during a
	// fill; OtherDeferRate the events per second deferred for other
	// reasons (the plugins' own deferrals, backlog, trigger errors).
	EventRate      float64
	OtherDeferRate float64
	// AcceptShare is the share of the events decided online that are
	// stored (accepted): they take store space too.
	AcceptShare float64
	// HeadroomBytes is what the store may still write before its disk
	// budget refuses writes.
	HeadroomBytes int64
	// Configured is the stage's configured deferral fraction, used while a
	// figure the plan needs is missing.
	Configured float64
}

// Reason says what set the planned fraction (a metric label).
type Reason string

// The planner's reasons.
const (
	// ReasonInterFill: the events the coming inter-fill can replay.
	ReasonInterFill Reason = "inter-fill"
	// ReasonStoreBudget: the store's headroom (× store_share).
	ReasonStoreBudget Reason = "store-budget"
	// ReasonBacklogBudget: max_backlog_bytes.
	ReasonBacklogBudget Reason = "backlog-budget"
	// ReasonMaxFraction: nothing binds below max_fraction.
	ReasonMaxFraction Reason = "max-fraction"
	// ReasonBeamOff: no fill; replay runs and events are deferred at
	// min_fraction.
	ReasonBeamOff Reason = "beam-off"
	// ReasonUnknownState: the source gave no state (the configured
	// fraction stands).
	ReasonUnknownState Reason = "unknown-state"
	// ReasonNotMeasured: the replay rate, the event rate or the event
	// size is not measured yet (the configured fraction stands).
	ReasonNotMeasured Reason = "not-measured"
)

// Reasons are every Reason, for metrics.
var Reasons = []Reason{ReasonInterFill, ReasonStoreBudget, ReasonBacklogBudget, ReasonMaxFraction, ReasonBeamOff, ReasonUnknownState, ReasonNotMeasured}

// Plan is the planner's answer: the fraction to defer and why, with the
// figures behind it (JSON: /status's fill.plan).
type Plan struct {
	Fraction float64 `json:"fraction"`
	Reason   Reason  `json:"reason"`
	// Clamped is "min" or "max" when the bounds moved the fraction the
	// reason asked for ("" otherwise).
	Clamped string `json:"clamped,omitempty"`
	Detail  string `json:"detail"` // the reason in words, with its numbers
	Beam    bool   `json:"beam"`
	Mode    Mode   `json:"mode"`
	Fill    uint32 `json:"fill,omitempty"`

	BacklogEvents uint64 `json:"backlog_events"`
	BacklogBytes  int64  `json:"backlog_bytes"`
	// ReplaySeconds is the expected time to replay the backlog (0: no
	// replay rate measured).
	ReplaySeconds float64 `json:"expected_replay_seconds"`
	// FillRemainingSeconds: in a fill, until it is expected to end.
	FillRemainingSeconds float64 `json:"fill_remaining_seconds"`
	// NextFillSeconds: until the next fill is expected to begin (in a
	// fill: after this one and the inter-fill after it).
	NextFillSeconds float64 `json:"next_fill_seconds"`
	// InterFillSeconds: the length of the coming inter-fill (in one: of
	// what is left of it).
	InterFillSeconds float64 `json:"inter_fill_seconds"`
	// CapacityEvents: the events replay can take in the coming inter-fill
	// (× safety); BudgetEvents: the events the store's budget lets the
	// backlog grow by (-1: no limit known).
	CapacityEvents float64 `json:"capacity_events"`
	BudgetEvents   float64 `json:"budget_events"`
	ReplayRate     float64 `json:"replay_rate"` // events/s used
	EventRate      float64 `json:"event_rate"`  // events/s used
}

// Plan computes the deferral fraction for in (see the package doc for
// the reasoning). It is a pure function of c and in.
func (c Config) Plan(in Inputs) Plan {
	st := in.State
	p := Plan{Mode: st.Mode, Fill: st.Fill, Beam: st.Mode.Beam(), BacklogEvents: in.BacklogEvents, BacklogBytes: in.BacklogBytes,
		ReplayRate: in.ReplayRate, EventRate: in.EventRate, BudgetEvents: -1}
	backlog := float64(in.BacklogEvents)
	if in.ReplayRate > 0 {
		p.ReplaySeconds = backlog / in.ReplayRate
	}
	configured := func(r Reason, why string) Plan {
		p.Fraction, p.Reason = c.clamp(in.Configured, &p), r
		p.Detail = fmt.Sprintf("%s: the configured fraction %.2f stands", why, in.Configured)
		return p
	}
	if !st.Known() {
		return configured(ReasonUnknownState, "the accelerator's state is not known")
	}
	now := in.Now
	if !p.Beam {
		var left time.Duration
		switch {
		case !st.NextFill.IsZero():
			left = st.NextFill.Sub(now)
		case !st.Since.IsZero():
			left = c.ExpectedInterFill - now.Sub(st.Since)
		default:
			left = c.ExpectedInterFill
		}
		left = max(left, 0)
		p.NextFillSeconds, p.InterFillSeconds = left.Seconds(), left.Seconds()
		p.Fraction, p.Reason = c.MinFraction, ReasonBeamOff
		switch {
		case in.BacklogEvents == 0:
			p.Detail = fmt.Sprintf("beam off (%s): nothing to replay; next fill expected in %s", st.Mode, secs(left))
		case in.ReplayRate <= 0:
			p.Detail = fmt.Sprintf("beam off (%s): replaying %d events (rate not measured yet); next fill expected in %s", st.Mode, in.BacklogEvents, secs(left))
		case p.ReplaySeconds <= left.Seconds():
			p.Detail = fmt.Sprintf("beam off (%s): replaying %d events at %.0f/s, done in %s, %s before the next fill", st.Mode, in.BacklogEvents, in.ReplayRate,
				secs(time.Duration(p.ReplaySeconds*float64(time.Second))), secs(left-time.Duration(p.ReplaySeconds*float64(time.Second))))
		default:
			p.Detail = fmt.Sprintf("beam off (%s): replaying %d events at %.0f/s; about %.0f will be left when the next fill begins in %s", st.Mode, in.BacklogEvents, in.ReplayRate,
				backlog-in.ReplayRate*left.Seconds(), secs(left))
		}
		return p
	}
	// In a fill: the rest of it, and the inter-fill after it.
	var rem time.Duration
	switch {
	case !st.Until.IsZero():
		rem = st.Until.Sub(now)
	case !st.Since.IsZero():
		rem = c.ExpectedFill - now.Sub(st.Since)
	default:
		rem = c.ExpectedFill
	}
	// At least one poll: the plan is made again then.
	rem = max(rem, c.Poll)
	gap := c.ExpectedInterFill
	if !st.Until.IsZero() && !st.NextFill.IsZero() {
		gap = max(st.NextFill.Sub(st.Until), 0)
	}
	p.FillRemainingSeconds, p.InterFillSeconds, p.NextFillSeconds = rem.Seconds(), gap.Seconds(), (rem + gap).Seconds()
	if in.ReplayRate <= 0 || in.EventRate <= 0 || in.EventBytes <= 0 {
		return configured(ReasonNotMeasured, "the replay rate, the event rate or the event size is not measured yet")
	}
	coming := in.EventRate * rem.Seconds() // events the stage will see in the rest of the fill
	other := in.OtherDeferRate * rem.Seconds()
	p.CapacityEvents = in.ReplayRate * gap.Seconds() * c.Safety
	f, reason := (p.CapacityEvents-backlog-other)/coming, ReasonInterFill
	p.Detail = fmt.Sprintf("the next inter-fill (%s) replays %.0f events at %.0f/s × safety %.2f; the backlog is %d, %.0f more events come in the %s left of the fill",
		secs(gap), p.CapacityEvents, in.ReplayRate, c.Safety, in.BacklogEvents, coming, secs(rem))
	// The store: deferred events and the accepted ones both take space.
	headroom := float64(in.HeadroomBytes) * c.StoreShare
	a := min(max(in.AcceptShare, 0), 1)
	bytes := coming * in.EventBytes
	if bytes > 0 {
		var fs float64
		if a >= 1 {
			fs = math.Inf(1) // everything is stored either way
			if headroom < bytes {
				fs = math.Inf(-1)
			}
		} else {
			fs = (headroom/bytes - a) / (1 - a)
		}
		p.BudgetEvents = max(fs*coming, 0)
		if fs < f {
			f, reason = fs, ReasonStoreBudget
			p.Detail = fmt.Sprintf("the store's headroom %.0f bytes × store_share %.2f holds %.0f more deferred events of %.0f bytes beside the accepted ones (%.0f%% of the rest)",
				float64(in.HeadroomBytes), c.StoreShare, p.BudgetEvents, in.EventBytes, a*100)
		}
		if c.MaxBacklogBytes > 0 {
			// A cap, not a target: the plan aims at store_share of it,
			// so that a rate above its estimate does not overshoot.
			room := float64(c.MaxBacklogBytes)*c.StoreShare - float64(in.BacklogBytes)
			fb := room / bytes
			if fb*coming < p.BudgetEvents {
				p.BudgetEvents = max(fb*coming, 0)
			}
			if fb < f {
				f, reason = fb, ReasonBacklogBudget
				p.Detail = fmt.Sprintf("max_backlog_bytes %d × store_share %.2f holds %.0f more deferred events of %.0f bytes (the backlog has %d bytes)",
					uint64(c.MaxBacklogBytes), c.StoreShare, max(room/in.EventBytes, 0), in.EventBytes, in.BacklogBytes)
			}
		}
	}
	if f >= c.MaxFraction {
		reason = ReasonMaxFraction
		p.Detail = fmt.Sprintf("the next inter-fill and the store can take more than max_fraction %.2f defers (%s)", c.MaxFraction, p.Detail)
	}
	p.Fraction, p.Reason = c.clamp(f, &p), reason
	return p
}

// clamp bounds f to [MinFraction, MaxFraction], noting which bound moved it.
func (c Config) clamp(f float64, p *Plan) float64 {
	switch {
	case math.IsNaN(f) || f < c.MinFraction:
		p.Clamped = "min"
		return c.MinFraction
	case f > c.MaxFraction:
		p.Clamped = "max"
		return c.MaxFraction
	}
	return f
}

// secs prints d rounded for a sentence ("2.5s", "3h0m0s").
func secs(d time.Duration) string {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
