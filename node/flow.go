package node

import (
	"maps"
	"sync"
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
	storedAcc   uint64
	storedDef   uint64
	storedBytes uint64
	replaced    uint64
	unacked     uint64
	dropped     map[string]uint64
	queueBytes  int64
}

func newFlow() *flow {
	// The drop reasons exist from the start so that their metrics do.
	return &flow{deferredBy: map[string]uint64{}, lines: map[string]uint64{},
		dropped: map[string]uint64{reasonStoreError: 0, reasonNotDurable: 0}}
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
}
