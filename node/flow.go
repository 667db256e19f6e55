package node

import (
	"maps"
	"sync"

	"github.com/sluice-daq/sluice/schemas"
)

// flow holds the counters of what happened to built events after the
// builder: decisions, store acknowledgements and drops. One mutex keeps a
// snapshot consistent across them.
type flow struct {
	mu          sync.Mutex
	accepted    uint64
	rejected    uint64
	deferred    uint64
	deferredBy  map[string]uint64
	lines       map[string]uint64
	stages      []StageLedger  // per online stage, in chain order
	stageIdx    map[string]int // index in stages by name
	storedAcc   uint64
	storedDef   uint64
	storedBytes uint64
	replaced    uint64
	unacked     uint64
	dropped     map[string]uint64
}

func newFlow() *flow {
	// The drop reasons exist from the start so that their metrics do.
	return &flow{deferredBy: map[string]uint64{}, lines: map[string]uint64{},
		dropped: map[string]uint64{reasonStoreError: 0, reasonNotDurable: 0}}
}

// setStages starts the per-stage counters for the chain's stages.
func (f *flow) setStages(c Decider) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stages, f.stageIdx = nil, map[string]int{}
	for i, name := range c.Stages() {
		f.stages = append(f.stages, StageLedger{Name: name, Lines: map[string]uint64{}})
		f.stageIdx[name] = i
	}
}

// countStages counts v in every stage it passed through and in the stage
// that decided it; events no stage decided (deferred by the node) are in
// none. f.mu is held.
func (f *flow) countStages(v *schemas.Verdict, c Decider) {
	last, ok := f.stageIdx[v.Stage]
	if !ok {
		return
	}
	lines := func(st *StageLedger, fired uint64) {
		for _, name := range schemas.FiredLines(fired, c.Lines(st.Name)) {
			st.Lines[name]++
		}
	}
	// The stages before the deciding one accepted the event and passed it on.
	for i := range last {
		st := &f.stages[i]
		st.Seen++
		st.Accepted++
		if i < len(v.Fired) {
			lines(st, v.Fired[i])
		}
	}
	st := &f.stages[last]
	st.Seen++
	switch v.Decision {
	case schemas.DecisionAccept:
		st.Accepted++
		lines(st, v.Lines)
	case schemas.DecisionReject:
		st.Rejected++
		if v.Reason.Kind == schemas.ReasonPrescaled {
			st.Prescaled++
		}
	default:
		st.Deferred++
	}
}

// fill copies the counters into l.
func (f *flow) fill(l *Ledger) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l.EventsAccepted, l.EventsRejected, l.EventsDeferred = f.accepted, f.rejected, f.deferred
	l.DeferredBy = maps.Clone(f.deferredBy)
	l.Lines = maps.Clone(f.lines)
	l.Stages = make([]StageLedger, len(f.stages))
	for i, st := range f.stages {
		st.Lines = maps.Clone(st.Lines)
		l.Stages[i] = st
	}
	l.EventsStoredAccepted, l.EventsStoredDeferred = f.storedAcc, f.storedDef
	l.EventsStored = f.storedAcc + f.storedDef
	l.BytesStored = f.storedBytes
	l.EventsReplaced = f.replaced
	l.EventsUnacked = f.unacked
	l.EventsDropped = maps.Clone(f.dropped)
}
