package node

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-daq/sluice/node/fill"
)

// FillStatus is fill-aware deferral in /status: the accelerator state
// source, the plan in force and the fills seen begin.
type FillStatus struct {
	Source      string    `json:"source"`                 // e.g. "schedule FILE", "http URL", "etcd KEY"
	SourceError string    `json:"source_error,omitempty"` // the last read's error (the state before it stands)
	Stage       string    `json:"stage"`                  // the online stage whose fraction the plan sets
	Plan        fill.Plan `json:"plan"`
	Plans       uint64    `json:"plans"` // plans made
	// BacklogPeakBytes is the largest deferred backlog a plan saw.
	BacklogPeakBytes int64 `json:"backlog_peak_bytes"`
	// MaxBacklogBytes is the configured cap on the deferred backlog
	// (fill.max_backlog_bytes; 0: none, the store's headroom bounds it).
	MaxBacklogBytes int64 `json:"max_backlog_bytes"`
	// FillStarts are the last fills seen begin (at most maxFillStarts),
	// with the deferred events the inter-fill before left unreplayed.
	FillStarts []FillStart `json:"fill_starts"`
}

// FillStart is one fill beginning.
type FillStart struct {
	Fill          uint32    `json:"fill,omitempty"`
	At            time.Time `json:"at"`
	BacklogEvents uint64    `json:"backlog_events"` // deferred events not replayed when it began
}

const maxFillStarts = 16

// fractionSetter is what the planner needs of the online chain.
type fractionSetter interface {
	SetDeferralFraction(stage string, f float64) error
}

// fillPlanner reads the accelerator's state every fill.poll, plans the
// deferral fraction (fill.Config.Plan) from the node's measurements, sets
// it on the planned stage and tells inter-fill replay whether the beam is
// on.
type fillPlanner struct {
	n          *Node
	cfg        fill.Config
	src        fill.Source
	stage      string
	chain      fractionSetter
	replay     *interFill
	parts      *Parts
	configured float64 // the stage's configured fraction
	done       chan struct{}

	mu     sync.Mutex
	status FillStatus
	last   fill.State // the last state read (it stands while the source fails)
	// since is when the beam was seen to turn on or off, for sources that
	// do not say (fill.State.Since zero).
	since    time.Time
	prevBeam bool
	// win are the counters over the last rateWindow of the current fill;
	// rate and other the event rates measured over it (kept from the last
	// fill while the beam is off: the next fill starts from them).
	win   []rateSample
	rate  float64 // events/s the stage sees
	other float64 // events/s deferred for other reasons
}

// rateSample is the planned stage's counters at one plan.
type rateSample struct {
	at          time.Time
	seen, other uint64
}

// rateWindow is the span the event rates are measured over; a rate is
// taken once the window spans minRatePolls plans.
const (
	rateWindow   = 2 * time.Second
	minRatePolls = 3
)

func newFillPlanner(n *Node, parts *Parts, replay *interFill) (*fillPlanner, error) {
	setter, ok := parts.Chain.(fractionSetter)
	if !ok {
		return nil, fmt.Errorf("fill: the online chain cannot change its deferral fraction")
	}
	src, err := n.cfg.Fill.Open()
	if err != nil {
		return nil, fmt.Errorf("fill: %w", err)
	}
	p := &fillPlanner{n: n, cfg: n.cfg.Fill, src: src, stage: n.cfg.FillStage(), chain: setter, replay: replay, parts: parts,
		done: make(chan struct{})}
	for _, s := range n.cfg.OnlineStages() {
		if s.Name == p.stage {
			p.configured = s.Deferral.Fraction
		}
	}
	p.status = FillStatus{Source: src.Describe(), Stage: p.stage, FillStarts: []FillStart{}, MaxBacklogBytes: int64(p.cfg.MaxBacklogBytes)}
	return p, nil
}

// run plans every poll until stop is closed or ctx ends, then closes the
// source.
func (p *fillPlanner) run(ctx context.Context, stop <-chan struct{}) {
	defer close(p.done)
	defer p.src.Close()
	t := time.NewTicker(p.cfg.Poll)
	defer t.Stop()
	for {
		p.tick(ctx, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-t.C:
		}
	}
}

func (p *fillPlanner) tick(ctx context.Context, now time.Time) {
	st, err := p.src.State(ctx, now)
	l := p.n.snapshot()
	rs := p.replay.status()
	backlog := p.parts.DeferredAtStart + l.EventsStoredDeferred - min(rs.Events-rs.Kept, p.parts.DeferredAtStart+l.EventsStoredDeferred)
	f := p.n.flow
	f.mu.Lock()
	defEvents, defBytes := f.storedDef, f.storedDefB
	f.mu.Unlock()
	var eventBytes float64
	switch {
	case defEvents > 0:
		eventBytes = float64(defBytes) / float64(defEvents)
	case l.EventsStored > 0:
		eventBytes = float64(l.BytesStored) / float64(l.EventsStored)
	}
	var seen uint64
	for _, s := range l.Stages {
		if s.Name == p.stage {
			seen = s.Seen
		}
	}
	other := l.EventsDeferred - min(l.DeferredBy[p.stage+"/fraction"], l.EventsDeferred)
	replayRate := p.replay.replayRate()
	if cap := p.n.cfg.Replay.Rate; cap > 0 && (replayRate == 0 || replayRate > cap) {
		// Until a pass measured it, the configured rate is the estimate.
		replayRate = cap
	}

	p.mu.Lock()
	if err != nil {
		if p.status.SourceError != err.Error() {
			p.n.log.Warn("fill: reading the accelerator state failed; the last state stands", "source", p.status.Source, "err", err)
		}
		p.status.SourceError = err.Error()
		st = p.last
	} else {
		if p.status.SourceError != "" {
			p.n.log.Info("fill: the accelerator state source answers again", "source", p.status.Source)
		}
		p.status.SourceError = ""
	}
	beam := st.Mode.Beam()
	prev := p.last
	p.last = st
	if prev.Known() && st.Known() && prev.Mode.Beam() != beam {
		p.since = now
	}
	if st.Since.IsZero() && !p.since.IsZero() {
		st.Since = p.since
	}
	// The stage's event rate, measured in fills only (the next fill
	// starts from the last one's).
	if beam {
		if !p.prevBeam {
			p.win = p.win[:0]
		}
		p.win = append(p.win, rateSample{at: now, seen: seen, other: other})
		for len(p.win) > minRatePolls && now.Sub(p.win[1].at) >= rateWindow {
			p.win = p.win[1:]
		}
		if first := p.win[0]; len(p.win) > minRatePolls {
			dt := now.Sub(first.at).Seconds()
			p.rate, p.other = float64(seen-first.seen)/dt, float64(other-first.other)/dt
		}
	}
	p.prevBeam = beam
	var headroom int64
	if p.parts.Store != nil {
		headroom = p.parts.Store.Headroom()
	}
	plan := p.cfg.Plan(fill.Inputs{
		Now: now, State: st, BacklogEvents: backlog, BacklogBytes: int64(float64(backlog) * eventBytes), EventBytes: eventBytes,
		ReplayRate: replayRate, EventRate: p.rate, OtherDeferRate: p.other, AcceptShare: acceptShare(&l),
		HeadroomBytes: headroom, Configured: p.configured,
	})
	old := p.status.Plan
	p.status.Plan = plan
	p.status.Plans++
	p.status.BacklogPeakBytes = max(p.status.BacklogPeakBytes, plan.BacklogBytes)
	if prev.Known() && !prev.Mode.Beam() && beam {
		p.status.FillStarts = append(p.status.FillStarts, FillStart{Fill: st.Fill, At: now, BacklogEvents: backlog})
		if k := len(p.status.FillStarts); k > maxFillStarts {
			p.status.FillStarts = append([]FillStart{}, p.status.FillStarts[k-maxFillStarts:]...)
		}
	}
	p.mu.Unlock()

	if err := p.chain.SetDeferralFraction(p.stage, plan.Fraction); err != nil {
		p.n.log.Error("fill: setting the deferral fraction failed", "stage", p.stage, "err", err)
	}
	switch {
	case !st.Known():
		p.replay.setBeam(beamUnknown)
	case beam:
		p.replay.setBeam(beamOn)
	default:
		p.replay.setBeam(beamOff)
	}
	switch {
	case prev.Known() && !prev.Mode.Beam() && beam:
		lvl := p.n.log.Info
		if backlog > 0 {
			lvl = p.n.log.Warn
		}
		lvl("fill: the beam is on; replay stops", "mode", st.Mode, "fill", st.Fill, "backlog_left", backlog)
	case prev.Known() && prev.Mode.Beam() && !beam:
		p.n.log.Info("fill: the beam is off; replaying the deferred backlog", "mode", st.Mode, "fill", prev.Fill, "backlog", backlog,
			"expected_replay_seconds", plan.ReplaySeconds, "next_fill_seconds", plan.NextFillSeconds)
	}
	if plan.Reason != old.Reason || plan.Clamped != old.Clamped {
		p.n.log.Info("fill: deferral plan", "fraction", plan.Fraction, "reason", plan.Reason, "clamped", plan.Clamped, "detail", plan.Detail)
	}
}

// acceptShare is the share of the events decided online that were
// accepted (stored): 0 before any.
func acceptShare(l *Ledger) float64 {
	if d := l.EventsAccepted + l.EventsRejected; d > 0 {
		return float64(l.EventsAccepted) / float64(d)
	}
	return 0
}

func (p *fillPlanner) statusOf() *FillStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.status
	s.FillStarts = append([]FillStart{}, s.FillStarts...)
	return &s
}
