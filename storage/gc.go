package storage

import (
	"errors"

	"github.com/dgraph-io/badger/v4"
)

// RunGC runs one value-log garbage collection pass: RunValueLogGC with
// Options.GCDiscardRatio until badger finds no file worth rewriting
// (ErrNoRewrite). It returns the number of value-log files rewritten.
// Space of events deleted by replay is reclaimed only here. The background
// loop calls it every Options.GCInterval; it is safe to call concurrently
// (badger rejects a second pass while one runs, which ends this one).
func (s *Store) RunGC() (int, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	s.m.gcRuns.Inc()
	n := 0
	for {
		err := s.db.RunValueLogGC(s.opts.GCDiscardRatio)
		switch {
		case err == nil:
			n++
			s.m.gcRewrites.Inc()
			continue
		case errors.Is(err, badger.ErrNoRewrite), errors.Is(err, badger.ErrRejected):
			err = nil
		}
		if n > 0 {
			s.guard.refresh(s.m)
		}
		return n, err
	}
}
