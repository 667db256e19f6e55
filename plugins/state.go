package plugins

import (
	"sync/atomic"

	"github.com/sluice-daq/sluice/schemas"
)

// StageState is one stage of a chain: what it runs, how its plugin
// processes are and what it decided so far (counters only grow). It does
// not depend on a metrics registry: a chain started without one (e.g. the
// replay chain) reports the same numbers.
type StageState struct {
	StageInfo
	Up       int    // plugin processes running and ready (0 once the chain is closed)
	Restarts uint64 // processes started again after a crash, a deadline or a cancelled call
	Backlog  int    // events in batches waiting for a free instance
	Calls    uint64 // Decide calls a plugin process answered
	Failures uint64 // Decide calls that failed (crash, deadline, the plugin's error)
	// Accepted (passed on to the next stage, or kept by the last one),
	// Rejected and Deferred count the events the stage saw, by what it
	// decided; the events it saw are their sum.
	Accepted, Rejected, Deferred uint64
	// Prescaled of the rejected events were accepted by the plugin but
	// lost every line to the stage's prescales.
	Prescaled uint64
	// Lines[b] counts the accepted events line b fired on, after the
	// prescales; as long as the plugin's lines, or longer when it set bits
	// it did not name.
	Lines []uint64
	// Shadow is what the stage's shadow plugin did; nil without one.
	Shadow *ShadowState
}

// Seen is the number of events the stage decided.
func (s *StageState) Seen() uint64 { return s.Accepted + s.Rejected + s.Deferred }

// State reports every stage in chain order; safe to call at any time from
// any goroutine, also after Close.
func (c *Chain) State() []StageState {
	out := make([]StageState, len(c.stages))
	for i, s := range c.stages {
		out[i] = s.state()
	}
	return out
}

func (s *stage) info() StageInfo {
	return StageInfo{Name: s.cfg.Name, Plugin: s.cfg.Plugin, Description: s.desc, Instances: len(s.slots), Digest: s.id.Digest}
}

// counters are what a stage did, kept beside its metrics for State.
type counters struct {
	decided   [4]atomic.Uint64 // events, by schemas.Decision
	prescaled atomic.Uint64
	lines     [schemas.MaxLines]atomic.Uint64
	calls     atomic.Uint64
	failures  atomic.Uint64
	restarts  atomic.Uint64
}

func (s *stage) state() StageState {
	st := StageState{
		StageInfo: s.info(),
		Restarts:  s.cnt.restarts.Load(), Backlog: int(s.waiting.Load()),
		Calls: s.cnt.calls.Load(), Failures: s.cnt.failures.Load(),
		Accepted:  s.cnt.decided[schemas.DecisionAccept].Load(),
		Rejected:  s.cnt.decided[schemas.DecisionReject].Load(),
		Deferred:  s.cnt.decided[schemas.DecisionDefer].Load(),
		Prescaled: s.cnt.prescaled.Load(),
	}
	for _, sl := range s.slots {
		if sl.pid.Load() != 0 {
			st.Up++
		}
	}
	n := len(s.desc.Lines)
	for b := range s.cnt.lines {
		if s.cnt.lines[b].Load() != 0 {
			n = max(n, b+1)
		}
	}
	st.Lines = make([]uint64, n)
	for b := range st.Lines {
		st.Lines[b] = s.cnt.lines[b].Load()
	}
	if s.shadow != nil {
		st.Shadow = s.shadow.state()
	}
	return st
}
