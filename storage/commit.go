package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/sluice-daq/sluice/schemas"
)

// CommitAck reports one replay commit.
type CommitAck struct {
	Ack
	Accepted int // events moved to the accepted stream
	Rejected int // events removed
	Kept     int // events left deferred (with the new stage and reason)
}

// Ledger counts the outcomes of every replay commit since the store was
// created; it is updated in the same transaction as the events it counts,
// so it can be checked against the streams after any crash.
type Ledger struct {
	Accepted uint64 `json:"accepted"` // deferred events accepted by replay
	Rejected uint64 `json:"rejected"` // deferred events rejected (removed) by replay
	Kept     uint64 `json:"kept"`     // outcomes that kept an event deferred
}

const ledgerSize = 24

func parseLedger(b []byte) (Ledger, error) {
	if len(b) != ledgerSize {
		return Ledger{}, schemas.Errorf("store ledger", "ledger", 0, schemas.ErrTruncated, "%d bytes, want %d", len(b), ledgerSize)
	}
	return Ledger{
		Accepted: binary.LittleEndian.Uint64(b),
		Rejected: binary.LittleEndian.Uint64(b[8:]),
		Kept:     binary.LittleEndian.Uint64(b[16:]),
	}, nil
}

func (l Ledger) encode() []byte {
	b := make([]byte, 0, ledgerSize)
	b = binary.LittleEndian.AppendUint64(b, l.Accepted)
	b = binary.LittleEndian.AppendUint64(b, l.Rejected)
	return binary.LittleEndian.AppendUint64(b, l.Kept)
}

func readLedger(txn *badger.Txn) (Ledger, error) {
	item, err := txn.Get(metaLedgerKey)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return Ledger{}, nil
	}
	if err != nil {
		return Ledger{}, err
	}
	var l Ledger
	err = item.Value(func(v []byte) error {
		l, err = parseLedger(v)
		return err
	})
	return l, err
}

// Ledger returns the replay ledger.
func (s *Store) Ledger() (Ledger, error) {
	var l Ledger
	err := s.db.View(func(txn *badger.Txn) (err error) {
		l, err = readLedger(txn)
		return err
	})
	return l, err
}

// Commit applies the replay trigger chain's verdicts on a batch read from
// the deferred stream (verdicts[i] for row i) in ONE badger transaction:
// accepted events are written to the accepted stream (status gains
// StatusReplayed) and removed from the deferred stream, rejected events are
// removed, events deferred again are rewritten in place with the new stage
// and reason, and the ledger is updated. As in Put, a verdict's status bits
// are added to the event's. A badger transaction is applied entirely or not
// at all after a crash (its entries carry a commit mark in the logs), which
// a WriteBatch — split into several transactions when large — does not
// promise; so a replay killed at any point and restarted processes every
// deferred event exactly once: a batch either was committed (its events are
// gone from the deferred stream) or is read again. An event no longer in
// the deferred stream makes the whole commit fail with ErrAlreadyCommitted.
// Batches must fit one transaction (badger's limit is 15 % of the memtable
// size in keys and pointers, thousands of events); the durability is the
// store's SyncPolicy, as for Put.
func (s *Store) Commit(b *Batch, verdicts []schemas.Verdict) (CommitAck, error) {
	if s.closed.Load() {
		return CommitAck{}, ErrClosed
	}
	if b.Stream != Deferred {
		return CommitAck{}, fmt.Errorf("store commit: batch is from the %s stream, not deferred", b.Stream)
	}
	ev := b.Events
	if len(verdicts) != ev.Len() {
		return CommitAck{}, fmt.Errorf("store commit: %d verdicts for %d events", len(verdicts), ev.Len())
	}
	start := time.Now()
	var ca CommitAck
	size := 0
	for i := range verdicts {
		v := &verdicts[i]
		if err := validateVerdict(v); err != nil {
			return ca, fmt.Errorf("store commit: row %d: %w", i, err)
		}
		switch v.Decision {
		case schemas.DecisionAccept, schemas.DecisionDefer:
			size += KeySize + encodedSize(ev, i, v) + KeySize + provBound(v) // and the older passes' bytes
		case schemas.DecisionReject:
		default:
			return ca, fmt.Errorf("store commit: row %d (run %d event %d): no decision", i, ev.Run(i), ev.EventID(i))
		}
	}
	if size > 0 {
		if err := s.guard.admit(uint64(size), s.m); err != nil {
			s.m.refused.Inc()
			return ca, err
		}
		defer s.guard.wrote(uint64(size))
	}
	// The accepted and kept events' new values go to the active segment
	// file once, before the transaction (which may run more than once)
	// points the keys at them. The commit arena holds the values, then the
	// pointers until the transaction has committed; it is reused, as fresh
	// memory is costly to touch.
	s.cmu.Lock()
	defer s.cmu.Unlock()
	s.commits.Add(1)
	need := size + ptrSize*len(verdicts)
	if cap(s.carena) < need {
		s.carena = make([]byte, 0, need)
	}
	buf := s.carena[:0]
	ends := s.cends[:0]
	for i := range verdicts {
		v := &verdicts[i]
		switch v.Decision {
		case schemas.DecisionAccept:
			buf = appendValue(buf, ev, i, v, ev.Status(i)|v.Status|schemas.StatusReplayed)
		case schemas.DecisionDefer:
			buf = appendValue(buf, ev, i, v, ev.Status(i)|v.Status)
		}
		ends = append(ends, len(buf))
	}
	s.cends = ends
	vals := buf
	var seg uint32
	var off int64
	if len(vals) > 0 {
		var err error
		if seg, off, err = s.segs.appendParts([][]byte{vals}, false); err != nil { // synced with the index (written)
			return CommitAck{}, fmt.Errorf("store commit: %w", err)
		}
		defer s.segs.indexed(seg)
	}
	// ptr is the index entry of row i's new value, in the arena after the
	// values.
	ptrs := buf[len(buf):]
	for i := range verdicts {
		v0 := 0
		if i > 0 {
			v0 = ends[i-1]
		}
		if v := vals[v0:ends[i]]; len(v) > 0 {
			ptrs = appendPtr(ptrs, valuePtr{seg: seg, off: off + int64(v0), n: uint32(len(v)), crc: crc32.Checksum(v, castagnoli)})
		} else {
			ptrs = append(ptrs, make([]byte, ptrSize)...) // rejected: no value
		}
	}
	var acceptedBytes int64
	at := uint64(start.UnixNano())
	var unstored []uint32 // plugin table entries to write in the transaction
	apply := func(txn *badger.Txn) error {
		ca = CommitAck{}
		acceptedBytes = 0
		unstored = unstored[:0]
		led, err := readLedger(txn)
		if err != nil {
			return err
		}
		s.plugins.mu.Lock()
		defer s.plugins.mu.Unlock()
		for i := range verdicts {
			v := &verdicts[i]
			k := Key{Run: ev.Run(i), EventID: ev.EventID(i)}
			dk := appendKey(nil, Deferred, k)
			if _, err := txn.Get(dk); errors.Is(err, badger.ErrKeyNotFound) {
				return fmt.Errorf("run %d event %d: %w", k.Run, k.EventID, ErrAlreadyCommitted)
			} else if err != nil {
				return err
			}
			ptr := ptrs[i*ptrSize : (i+1)*ptrSize : (i+1)*ptrSize]
			// The event's provenance gets this replay pass (or goes with
			// the event when it is rejected).
			pk := appendProvKey(nil, k)
			if v.Decision == schemas.DecisionReject {
				if err := txn.Delete(pk); err != nil {
					return err
				}
			} else {
				var old []byte
				if item, err := txn.Get(pk); err == nil {
					if old, err = item.ValueCopy(nil); err != nil {
						return err
					}
				} else if !errors.Is(err, badger.ErrKeyNotFound) {
					return err
				}
				if err := txn.Set(pk, s.plugins.addPass(nil, old, true, at, v, &unstored)); err != nil {
					return err
				}
			}
			switch v.Decision {
			case schemas.DecisionAccept:
				if err := txn.Set(appendKey(nil, Accepted, k), ptr); err != nil {
					return err
				}
				v0 := 0
				if i > 0 {
					v0 = ends[i-1]
				}
				acceptedBytes += int64(ends[i] - v0)
				if err := txn.Delete(dk); err != nil {
					return err
				}
				ca.Accepted++
			case schemas.DecisionReject:
				if err := txn.Delete(dk); err != nil {
					return err
				}
				ca.Rejected++
			case schemas.DecisionDefer:
				if err := txn.Set(dk, ptr); err != nil {
					return err
				}
				ca.Kept++
			}
		}
		led.Accepted += uint64(ca.Accepted)
		led.Rejected += uint64(ca.Rejected)
		led.Kept += uint64(ca.Kept)
		recs, err := s.plugins.records(unstored)
		if err != nil {
			return fmt.Errorf("plugin table: %w", err)
		}
		for _, kv := range recs {
			if err := txn.Set(kv[0], kv[1]); err != nil {
				return err
			}
		}
		return txn.Set(metaLedgerKey, led.encode())
	}
	// A concurrent Put of the same deferred event conflicts with the
	// transaction's reads; the transaction is then simply run again.
	before := s.ledgerBefore()
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = s.db.Update(apply); !errors.Is(err, badger.ErrConflict) {
			break
		}
	}
	if err != nil {
		return CommitAck{}, fmt.Errorf("store commit: %w", err)
	}
	s.plugins.markStored(unstored)
	s.checkCommit(before, b, verdicts, ca)
	ack, err := s.written(ev.Len(), acceptedBytes)
	ca.Ack = ack
	if err != nil {
		return ca, fmt.Errorf("store commit: %w", err)
	}
	s.m.written(time.Since(start))
	s.m.removed.WithLabelValues("accepted").Add(float64(ca.Accepted))
	s.m.removed.WithLabelValues("rejected").Add(float64(ca.Rejected))
	return ca, nil
}
