package storage

import (
	"errors"

	"github.com/dgraph-io/badger/v4"

	"github.com/sluice-daq/sluice/internal/invariants"
	"github.com/sluice-daq/sluice/schemas"
)

// checkPut verifies, in the invariants build, that every row a Put wrote is
// readable under its key afterwards: a value that decodes, belongs to its key,
// and carries the batch's payload bytes per source group.
// commits is s.commits when the Put began: a deferred event a replay
// commit since then moved or removed is not a violation.
func (s *Store) checkPut(stream Stream, batch *schemas.EventBatch, rows []int, commits uint64) {
	if !invariants.Enabled {
		return
	}
	defer s.segs.endRead(s.segs.beginRead())
	err := s.db.View(func(txn *badger.Txn) error {
		var r record
		var buf []byte
		for _, i := range rows {
			k := Key{Run: batch.Run(i), EventID: batch.EventID(i)}
			item, err := txn.Get(appendKey(nil, stream, k))
			if errors.Is(err, badger.ErrKeyNotFound) && stream == Deferred && s.commits.Load() != commits {
				continue // replayed meanwhile (TestConcurrentWriterAndReplay)
			}
			if err != nil {
				invariants.Failf("store", "put %s run %d event %d: not readable afterwards: %v", stream, k.Run, k.EventID, err)
			}
			var v []byte
			if err := s.eventValue(item, &buf, func(b []byte) error { v = append(v[:0], b...); return nil }); err != nil {
				return err
			}
			if err := decodeValue(v, &r); err != nil {
				invariants.Failf("store", "put %s run %d event %d: stored value does not decode: %v", stream, k.Run, k.EventID, err)
			}
			if err := r.checkKey(k); err != nil {
				invariants.Failf("store", "put %s: %v", stream, err)
			}
			if len(r.groups) != len(batch.Groups) {
				invariants.Failf("store", "put %s run %d event %d: %d groups stored, batch has %d", stream, k.Run, k.EventID, len(r.groups), len(batch.Groups))
			}
			for g := range r.groups {
				if got, want := len(r.groups[g].payload), len(batch.GroupPayload(g, i)); got != want {
					invariants.Failf("store", "put %s run %d event %d group %d: %d payload bytes stored, batch has %d", stream, k.Run, k.EventID, g, got, want)
				}
			}
		}
		return nil
	})
	if err != nil {
		invariants.Failf("store", "put %s: reading back: %v", stream, err)
	}
}

// checkCommit verifies, in the invariants build, that a replay commit did
// what it reported, all in one step: the ledger moved by exactly the
// commit's counts, an accepted event is in the accepted stream (marked
// replayed) and gone from the deferred one, a rejected one is gone, a kept
// one is still deferred. Commits hold cmu, so no other commit moves the
// ledger in between.
func (s *Store) checkCommit(before Ledger, b *Batch, verdicts []schemas.Verdict, ca CommitAck) {
	if !invariants.Enabled {
		return
	}
	err := s.db.View(func(txn *badger.Txn) error {
		after, err := readLedger(txn)
		if err != nil {
			return err
		}
		if after.Accepted != before.Accepted+uint64(ca.Accepted) || after.Rejected != before.Rejected+uint64(ca.Rejected) || after.Kept != before.Kept+uint64(ca.Kept) {
			invariants.Failf("store", "commit: ledger %+v -> %+v for %d accepted, %d rejected, %d kept", before, after, ca.Accepted, ca.Rejected, ca.Kept)
		}
		if ca.Accepted+ca.Rejected+ca.Kept != len(verdicts) {
			invariants.Failf("store", "commit: %d verdicts, %d counted", len(verdicts), ca.Accepted+ca.Rejected+ca.Kept)
		}
		has := func(st Stream, k Key) bool {
			_, err := txn.Get(appendKey(nil, st, k))
			if err != nil && !errors.Is(err, badger.ErrKeyNotFound) {
				invariants.Failf("store", "commit: reading back run %d event %d: %v", k.Run, k.EventID, err)
			}
			return err == nil
		}
		for i := range verdicts {
			k := Key{Run: b.Events.Run(i), EventID: b.Events.EventID(i)}
			inDeferred := has(Deferred, k)
			switch verdicts[i].Decision {
			case schemas.DecisionAccept:
				if inDeferred || !has(Accepted, k) {
					invariants.Failf("store", "commit: accepted run %d event %d: deferred %v, accepted %v", k.Run, k.EventID, inDeferred, has(Accepted, k))
				}
			case schemas.DecisionReject:
				if inDeferred {
					invariants.Failf("store", "commit: rejected run %d event %d is still deferred", k.Run, k.EventID)
				}
			case schemas.DecisionDefer:
				if !inDeferred {
					invariants.Failf("store", "commit: kept run %d event %d is not deferred", k.Run, k.EventID)
				}
			}
		}
		return nil
	})
	if err != nil {
		invariants.Failf("store", "commit: reading back: %v", err)
	}
}

// ledgerBefore reads the replay ledger for checkCommit (invariants build only).
func (s *Store) ledgerBefore() Ledger {
	if !invariants.Enabled {
		return Ledger{}
	}
	l, err := s.Ledger()
	if err != nil {
		invariants.Failf("store", "commit: reading the ledger before: %v", err)
	}
	return l
}
