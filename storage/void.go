package storage

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// Void is the stream of tombstones: events moved out of the accepted and
// deferred streams because they must not be processed (exported,
// replayed) here, e.g. events a farm builder unit stored for work that
// was reassigned after it was declared dead and built again elsewhere. A
// tombstone keeps the event's value unchanged (its decision byte says
// whether it was accepted or deferred), so what was voided can still be
// listed and exported for audit; replay and the accepted stream no
// longer see it.
const Void Stream = 3

// errGone: an event found by Void's scan was removed before its move.
var errGone = errors.New("event gone")

// IDRange is the event ids First .. First+N-1 of one run.
type IDRange struct {
	Run   uint32
	First uint64
	N     uint64
}

// Voided is what Void moved, per stream it came from, in key order.
type Voided struct {
	Accepted []Key
	Deferred []Key
}

// Len is the number of events voided.
func (v Voided) Len() int { return len(v.Accepted) + len(v.Deferred) }

// Void moves the events of the ranges found in the accepted and deferred
// streams to the void stream, and syncs. Each event moves in one
// transaction (its tombstone written, its key deleted), so a crash leaves
// it in one place; a second call voids nothing more (idempotent). Errors:
// ErrClosed, badger's.
func (s *Store) Void(ranges []IDRange) (Voided, error) {
	var out Voided
	if s.closed.Load() {
		return out, ErrClosed
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	type kv struct {
		stream Stream
		key    Key
	}
	var found []kv
	err := s.db.View(func(txn *badger.Txn) error {
		for _, st := range []Stream{Accepted, Deferred} {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(st)}})
			for _, r := range ranges {
				if r.N == 0 {
					continue
				}
				last := r.First + r.N - 1
				for it.Seek(appendKey(nil, st, Key{Run: r.Run, EventID: r.First})); it.Valid(); it.Next() {
					_, k, ok := parseKey(it.Item().Key())
					if !ok || k.Run != r.Run || k.EventID > last {
						break
					}
					found = append(found, kv{st, k})
				}
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("store void: %w", err)
	}
	txn := s.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	var pending Voided // in txn, not committed yet
	commit := func() error {
		if err := txn.Commit(); err != nil {
			return err
		}
		out.Accepted = append(out.Accepted, pending.Accepted...)
		out.Deferred = append(out.Deferred, pending.Deferred...)
		pending = Voided{}
		return nil
	}
	for _, e := range found {
		set := func(t *badger.Txn) error {
			// The entry is read again in the transaction: GC may have
			// moved its value meanwhile, and the read makes such a move
			// conflict with this transaction instead of leaving the
			// tombstone pointing at the old copy.
			item, err := t.Get(appendKey(nil, e.stream, e.key))
			if errors.Is(err, badger.ErrKeyNotFound) {
				return errGone
			}
			if err != nil {
				return err
			}
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			if err := t.Set(appendKey(nil, Void, e.key), v); err != nil {
				return err
			}
			return t.Delete(appendKey(nil, e.stream, e.key))
		}
		err := set(txn)
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err = commit(); err == nil {
				txn = s.db.NewTransaction(true)
				err = set(txn)
			}
		}
		if errors.Is(err, errGone) {
			continue // removed since the scan (a replay commit): nothing to void
		}
		if err != nil {
			return out, fmt.Errorf("store void: %w", err)
		}
		if e.stream == Accepted {
			pending.Accepted = append(pending.Accepted, e.key)
		} else {
			pending.Deferred = append(pending.Deferred, e.key)
		}
	}
	if err := commit(); err != nil {
		return out, fmt.Errorf("store void: %w", err)
	}
	if out.Len() > 0 {
		if err := s.db.Sync(); err != nil {
			return out, fmt.Errorf("store void: sync: %w", err)
		}
	}
	return out, nil
}
