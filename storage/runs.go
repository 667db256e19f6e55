package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// runEndKey is the key of run's end record: "\x00run" and the run number
// big-endian (see the package doc).
func runEndKey(run uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte{metaPrefix, 'r', 'u', 'n'}, run)
}

// EndRun records that run ended here normally (drained, not killed), at
// t, and syncs it: a later start with the same run number on this store is
// then a rerun, not a resumption after a crash.
func (s *Store) EndRun(run uint32, t time.Time) error {
	v := binary.LittleEndian.AppendUint64(nil, uint64(t.UnixNano()))
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(runEndKey(run), v) }); err != nil {
		return fmt.Errorf("end of run %d: %w", run, err)
	}
	return s.db.Sync()
}

// RunEnded says whether and when run ended normally on this store
// (EndRun); ok is false for a run never taken here, still going on, or
// killed (which a restart resumes).
func (s *Store) RunEnded(run uint32) (at time.Time, ok bool, err error) {
	err = s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(runEndKey(run))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("end record of run %d: %d bytes, want 8", run, len(v))
			}
			at, ok = time.Unix(0, int64(binary.LittleEndian.Uint64(v))), true
			return nil
		})
	})
	return at, ok, err
}
