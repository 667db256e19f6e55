package node

import (
	"fmt"
	"sync"
)

// State is the node's run-control state. A node moves strictly forward:
// idle → configured → running → draining → stopped.
type State int32

// Run-control states.
const (
	StateIdle       State = iota // created, configuration not yet checked
	StateConfigured              // configuration valid, pipeline set up, inputs not open
	StateRunning                 // inputs open, data flowing
	StateDraining                // inputs stopped; open events, the chain and the store are being finished
	StateStopped                 // everything flushed and closed; the ledger is final
)

var stateNames = [...]string{"idle", "configured", "running", "draining", "stopped"}

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", int32(s))
}

// MarshalText writes the state's name (in /status JSON).
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a state's name (a client of /status, such as
// `sluice farm status`). Errors: a name that is no state.
func (s *State) UnmarshalText(b []byte) error {
	for i, n := range stateNames {
		if n == string(b) {
			*s = State(i)
			return nil
		}
	}
	return fmt.Errorf("node state %q: want one of %v", b, stateNames)
}

// runControl holds the state and the drain request. Transitions only go
// forward; a drain can be requested in any state and is acted on once.
type runControl struct {
	mu      sync.Mutex
	state   State
	drain   chan struct{} // closed when a drain is requested
	once    sync.Once
	changed func(State) // called (with mu held) on each transition, e.g. to log it
}

func newRunControl(changed func(State)) *runControl {
	return &runControl{drain: make(chan struct{}), changed: changed}
}

// State returns the current state.
func (rc *runControl) State() State {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.state
}

// advance moves to next if it is the state right after the current one
// (or, for stopped, any earlier state: a failed start ends there too).
func (rc *runControl) advance(next State) error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if next != rc.state+1 && !(next == StateStopped && rc.state < StateStopped) {
		return fmt.Errorf("run control: cannot go from %s to %s", rc.state, next)
	}
	rc.state = next
	if rc.changed != nil {
		rc.changed(next)
	}
	return nil
}

// requestDrain asks the run to drain (signal, POST /run/stop, end of
// input). It reports whether this call was the first request.
func (rc *runControl) requestDrain() bool {
	first := false
	rc.once.Do(func() { close(rc.drain); first = true })
	return first
}

// draining is closed once a drain has been requested.
func (rc *runControl) draining() <-chan struct{} { return rc.drain }
