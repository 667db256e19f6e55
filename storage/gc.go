package storage

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/dgraph-io/badger/v4"
)

// RunGC reclaims the space of removed and replaced events and returns the
// number of files it removed or rewrote. Segment files (segments.go): a
// scan of the index counts each file's live bytes; a file nothing points
// into is deleted, and one whose dead bytes are at least
// Options.GCDiscardRatio of it has its live values copied to the active
// file (fsync'ed, then the index entries moved in transactions that check
// each entry is unchanged) and is then deleted. Deletion waits for readers
// that began before it (segments.doom). Then badger's value-log GC, for
// the values of stores written before segment files: RunValueLogGC until
// badger finds no file worth rewriting. Space of events deleted by replay
// is reclaimed only here. The background loop calls it every
// Options.GCInterval; a call while another runs, or on a read-only store,
// returns 0 at once.
func (s *Store) RunGC() (int, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	if s.opts.ReadOnly {
		return 0, nil
	}
	if !s.gcmu.TryLock() {
		return 0, nil
	}
	defer s.gcmu.Unlock()
	s.m.gcRuns.Inc()
	n, err := s.collectSegments()
	for err == nil {
		err = s.db.RunValueLogGC(s.opts.GCDiscardRatio)
		switch {
		case err == nil:
			n++
			s.m.gcRewrites.Inc()
			continue
		case errors.Is(err, badger.ErrNoRewrite), errors.Is(err, badger.ErrRejected):
			err = nil
		}
		break
	}
	if n > 0 {
		s.guard.refresh(s.m)
	}
	return n, err
}

// indexEntry is an index key and the pointer it held when scanned.
type indexEntry struct {
	key []byte
	ptr valuePtr
	raw []byte
}

// collectSegments is RunGC's segment part.
func (s *Store) collectSegments() (int, error) {
	cand := s.segs.snapshot()
	if len(cand) == 0 {
		return 0, nil
	}
	live := map[uint32]int64{}
	err := s.scanIndex(func(_ []byte, p valuePtr, _ []byte) {
		if cand[p.seg] {
			live[p.seg] += int64(p.n)
		}
	})
	if err != nil {
		return 0, err
	}
	var dead, sparse []uint32
	for id := range cand {
		size := s.segs.fileSize(id) - segHeaderSize
		switch {
		case live[id] == 0:
			dead = append(dead, id)
		case size > 0 && float64(size-live[id]) >= s.opts.GCDiscardRatio*float64(size):
			sparse = append(sparse, id)
		}
	}
	s.segs.doom(dead)
	n := len(dead)
	for _, id := range sparse {
		moved, err := s.moveSegment(id)
		if err != nil {
			return n, fmt.Errorf("store %s: GC of segment %s: %w", s.opts.Dir, segName(id), err)
		}
		if moved {
			s.segs.doom([]uint32{id})
			n++
			s.m.gcRewrites.Inc()
		}
	}
	return n, nil
}

// scanIndex calls fn with every index entry that is a pointer (every
// stream, tombstones included); raw is the entry as stored. Keys and values
// are only valid during fn.
func (s *Store) scanIndex(fn func(key []byte, p valuePtr, raw []byte)) error {
	return s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			if k := item.Key(); len(k) == 0 || k[0] == metaPrefix || k[0] == provPrefix || item.ValueSize() != ptrSize {
				continue
			}
			err := item.Value(func(v []byte) error {
				if isPtr(v) {
					p, err := parsePtr(v)
					if err != nil {
						return err
					}
					fn(item.Key(), p, v)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// moveChunk bounds the values one move transaction rewrites.
const (
	moveChunkBytes = 16 << 20
	moveChunkKeys  = 4096
)

// moveSegment copies the live values of segment id to the active file and
// points their index entries at the copies. moved is false if some entry
// could not be moved (a conflict with concurrent writes three times): the
// segment then stays, for the next pass.
func (s *Store) moveSegment(id uint32) (moved bool, err error) {
	var entries []indexEntry
	err = s.scanIndex(func(key []byte, p valuePtr, raw []byte) {
		if p.seg == id {
			entries = append(entries, indexEntry{key: bytes.Clone(key), ptr: p, raw: bytes.Clone(raw)})
		}
	})
	if err != nil {
		return false, err
	}
	var buf []byte
	for len(entries) > 0 {
		k, size := 0, int64(0)
		for k < len(entries) && k < moveChunkKeys && (k == 0 || size+int64(entries[k].ptr.n) <= moveChunkBytes) {
			size += int64(entries[k].ptr.n)
			k++
		}
		chunk := entries[:k]
		entries = entries[k:]
		ok, err := s.moveChunk(chunk, &buf)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// moveChunk moves one chunk of a segment's entries (see moveSegment).
func (s *Store) moveChunk(chunk []indexEntry, buf *[]byte) (bool, error) {
	vals := (*buf)[:0]
	var one []byte
	for _, e := range chunk {
		v, err := s.segs.read(e.ptr, one)
		if err != nil {
			return false, err
		}
		one = v
		vals = append(vals, v...)
	}
	*buf = vals
	need := uint64(len(vals))
	if err := s.guard.admit(need, s.m); err != nil {
		return false, err
	}
	defer s.guard.wrote(need)
	// Fsync'ed unless SyncNever: the old copy is deleted once the index
	// points here, so the new one must be durable first.
	seg, off, err := s.segs.appendParts([][]byte{vals}, !s.segs.never)
	if err != nil {
		return false, err
	}
	defer s.segs.indexed(seg)
	ptrs := make([][]byte, len(chunk))
	o := off
	for i, e := range chunk {
		v := vals[o-off : o-off+int64(e.ptr.n)]
		ptrs[i] = appendPtr(nil, valuePtr{seg: seg, off: o, n: e.ptr.n, crc: crc32.Checksum(v, castagnoli)})
		o += int64(e.ptr.n)
	}
	apply := func(txn *badger.Txn) error {
		for i, e := range chunk {
			item, err := txn.Get(e.key)
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue // removed meanwhile
			}
			if err != nil {
				return err
			}
			same := false
			if err := item.Value(func(v []byte) error { same = bytes.Equal(v, e.raw); return nil }); err != nil {
				return err
			}
			if !same {
				continue // rewritten meanwhile: it points elsewhere now
			}
			if err := txn.Set(e.key, ptrs[i]); err != nil {
				return err
			}
		}
		return nil
	}
	for attempt := 0; attempt < 3; attempt++ {
		if err = s.db.Update(apply); !errors.Is(err, badger.ErrConflict) {
			break
		}
	}
	if errors.Is(err, badger.ErrConflict) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !s.segs.never {
		if err := s.db.Sync(); err != nil {
			return false, err
		}
	}
	return true, nil
}
