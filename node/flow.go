package node

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// flow holds the counters of what happened to built events after the
// builder: decisions, store acknowledgements and drops (what each trigger
// stage did is the chain's State). One mutex keeps a snapshot consistent
// across them.
type flow struct {
	mu          sync.Mutex
	accepted    uint64
	rejected    uint64
	deferred    uint64
	deferredBy  map[string]uint64
	lines       map[string]uint64   // accepted events by "stage/line" of the deciding stage
	names       map[string][]string // line names by stage
	storedAcc   uint64
	storedDef   uint64
	storedBytes uint64
	storedDefB  uint64 // of storedBytes, the deferred stream's (the fill plan's backlog size)
	replaced    uint64
	unacked     uint64
	dropped     map[string]uint64
	notStored   []uint64 // ids dropped as not_stored_at_drain
	// doneAt is when the last batch was finished with: stored and
	// released, or its last write acknowledged durable.
	doneAt time.Time
}

// lastFinished is when the last batch was finished with (zero: none yet).
func (f *flow) lastFinished() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.doneAt
}

// finished records that a batch was finished with at t.
func (f *flow) finished(t time.Time) {
	f.mu.Lock()
	f.finishedLocked(t)
	f.mu.Unlock()
}

// finishedLocked is finished with f.mu held.
func (f *flow) finishedLocked(t time.Time) {
	if t.After(f.doneAt) {
		f.doneAt = t
	}
}

func newFlow() *flow {
	// The drop reasons exist from the start so that their metrics do.
	return &flow{deferredBy: map[string]uint64{}, lines: map[string]uint64{},
		dropped: map[string]uint64{reasonStoreError: 0, reasonNotDurable: 0}}
}

// setChain takes the line names of c's stages, for the lines counters.
func (f *flow) setChain(c Decider) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.names = lineNames(c)
}

// fill copies the counters into l.
func (f *flow) fill(l *Ledger) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l.EventsAccepted, l.EventsRejected, l.EventsDeferred = f.accepted, f.rejected, f.deferred
	l.DeferredBy = maps.Clone(f.deferredBy)
	l.Lines = maps.Clone(f.lines)
	l.EventsStoredAccepted, l.EventsStoredDeferred = f.storedAcc, f.storedDef
	l.EventsStored = f.storedAcc + f.storedDef
	l.BytesStored = f.storedBytes
	l.EventsReplaced = f.replaced
	l.EventsUnacked = f.unacked
	l.EventsDropped = maps.Clone(f.dropped)
	l.NotStoredAtDrain = slices.Clone(f.notStored)
}
