package plugins

import (
	"errors"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
)

// errReleased: the batch's owner released it before the shadow's call read
// it (see lease).
var errReleased = errors.New("shadow: the batch was released before the shadow read it")

// lease is a shadow's hold on one batch its production stage decided, read
// where production's plugins read it (the arena the builder and the
// plugins share), without a copy. The hold ends when the shadow is done
// with the batch (end) or when the batch's owner releases it (revoke,
// through schemas.EventBatch.OnRelease), whichever comes first: the owner
// never waits for the shadow, and its memory is never kept past that
// release. A shadow whose call was still running at the release may have
// read memory already reused, so its result for the batch is void.
//
// The node-side part of a call, placing the batch for the plugin (its
// buffers' places, or a copy when they lie outside the arena), reads the
// record's Go structures: a revoke during it only marks the lease, and the
// reference goes when the placing ends, microseconds later.
type lease struct {
	rows int // events of the batch

	mu      sync.Mutex
	rec     arrow.RecordBatch // retained; nil once released
	reading bool              // a call is placing rec for the plugin
	revoked bool              // the owner released the batch before end
	ended   bool              // the shadow is done with it
}

// newLease retains rec for the shadow.
func newLease(rec arrow.RecordBatch) *lease {
	rec.Retain()
	return &lease{rows: int(rec.NumRows()), rec: rec}
}

// acquire returns the batch for placing (placed ends that); false once the
// owner has released it.
func (l *lease) acquire() (arrow.RecordBatch, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.revoked || l.rec == nil {
		return nil, false
	}
	l.reading = true
	return l.rec, true
}

// placed: the call no longer reads the record's structures (the plugin
// may still read the memory it lies in).
func (l *lease) placed() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reading = false
	if l.revoked {
		l.free()
	}
}

// revoke is the owner's release of the batch: the shadow's reference goes
// now (or when the placing in progress ends) and its result is void.
func (l *lease) revoke() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return
	}
	l.revoked = true
	if !l.reading {
		l.free()
	}
}

// wasRevoked reports whether the owner released the batch already.
func (l *lease) wasRevoked() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.revoked
}

// end: the shadow is done with the batch. It reports whether the owner
// released it first (what the shadow decided on may not have been the
// batch: the result is void).
func (l *lease) end() (revoked bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = true
	l.free()
	return l.revoked
}

func (l *lease) free() {
	if l.rec != nil {
		l.rec.Release()
		l.rec = nil
	}
}
