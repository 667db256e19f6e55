package storage

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/sluice-daq/sluice/schemas"
)

// StreamStats describes one stream.
type StreamStats struct {
	Stream Stream
	Events uint64
	Bytes  int64    // encoded value bytes
	Runs   []uint32 // distinct run numbers, ascending
	// Oldest and Newest are the first and last events in key order
	// (run, event id) with their timestamps (ns); zero when empty.
	Oldest, Newest     Key
	OldestTS, NewestTS uint64
}

// Stats describes the whole store.
type Stats struct {
	Dir       string
	Mode      schemas.Mode
	Groups    []schemas.SourceGroup
	Streams   []StreamStats
	DiskBytes uint64 // bytes the store's files occupy
	FreeBytes uint64 // bytes free on its file system
	Ledger    Ledger
}

// Stats scans the keys of both streams, and of the void stream when it
// holds tombstones (the index only; the values of the two end events of each stream
// are read).
func (s *Store) Stats() (Stats, error) {
	st := Stats{Dir: s.opts.Dir}
	if ss := s.schema.Load(); ss != nil {
		st.Mode = ss.Mode
		g, err := ss.groups()
		if err != nil {
			return st, err
		}
		st.Groups = g
	}
	free, size, err := s.guard.measure()
	if err != nil {
		return st, fmt.Errorf("store %s: %w", s.opts.Dir, err)
	}
	st.FreeBytes, st.DiskBytes = free, size
	defer s.segs.endRead(s.segs.beginRead())
	err = s.db.View(func(txn *badger.Txn) error {
		var err error
		if st.Ledger, err = readLedger(txn); err != nil {
			return err
		}
		for _, stream := range Streams {
			ss, err := s.streamStats(txn, stream)
			if err != nil {
				return err
			}
			st.Streams = append(st.Streams, ss)
		}
		// Tombstones and shadow events are listed when there are some.
		for _, stream := range []Stream{Void, Shadow} {
			ss, err := s.streamStats(txn, stream)
			if err != nil {
				return err
			}
			if ss.Events > 0 {
				st.Streams = append(st.Streams, ss)
			}
		}
		return nil
	})
	return st, err
}

func (s *Store) streamStats(txn *badger.Txn, stream Stream) (StreamStats, error) {
	ss := StreamStats{Stream: stream}
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(stream)}})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		_, k, ok := parseKey(it.Item().Key())
		if !ok {
			continue
		}
		if ss.Events == 0 {
			ss.Oldest = k
		}
		ss.Newest = k
		ss.Events++
		n, err := valueSize(it.Item())
		if err != nil {
			return ss, err
		}
		ss.Bytes += n
		if n := len(ss.Runs); n == 0 || ss.Runs[n-1] != k.Run {
			ss.Runs = append(ss.Runs, k.Run) // keys ascend, so runs do
		}
	}
	if ss.Events == 0 {
		return ss, nil
	}
	var err error
	if ss.OldestTS, err = s.timestampOf(txn, stream, ss.Oldest); err != nil {
		return ss, err
	}
	ss.NewestTS, err = s.timestampOf(txn, stream, ss.Newest)
	return ss, err
}

func (s *Store) timestampOf(txn *badger.Txn, stream Stream, k Key) (uint64, error) {
	info, err := s.getInfo(txn, stream, k)
	return info.Timestamp, err
}

// EventInfo is the metadata of one stored event, as `sluice store ls`
// shows it.
type EventInfo struct {
	Stream         Stream
	Key            Key
	Timestamp      uint64 // ns
	Status         schemas.EventStatus
	NumFragments   uint32
	MissingSources int
	CorruptSources int
	Verdict        schemas.Verdict // as stored: decision, lines, stage, reason text
	Bytes          int             // encoded value bytes
}

func infoOf(stream Stream, k Key, v []byte, r *record) (EventInfo, error) {
	if err := decodeValue(v, r); err != nil {
		return EventInfo{}, err
	}
	if err := r.checkKey(k); err != nil {
		return EventInfo{}, err
	}
	return EventInfo{
		Stream: stream, Key: k, Timestamp: r.timestamp, Status: schemas.EventStatus(r.status),
		NumFragments: r.nFrags, MissingSources: len(r.missing) / 4, CorruptSources: len(r.corrupt) / 4,
		Verdict: r.verdict(), Bytes: len(v),
	}, nil
}

func (s *Store) getInfo(txn *badger.Txn, stream Stream, k Key) (EventInfo, error) {
	item, err := txn.Get(appendKey(nil, stream, k))
	if err != nil {
		return EventInfo{}, err
	}
	var info EventInfo
	var r record
	var buf []byte
	err = s.eventValue(item, &buf, func(v []byte) (err error) {
		info, err = infoOf(stream, k, v, &r)
		return err
	})
	return info, err
}

// Count is the number of events of stream in the selection, from the keys
// alone (the value log is not read).
func (s *Store) Count(stream Stream, sel Selection) (uint64, error) {
	if !stream.valid() {
		return 0, fmt.Errorf("store count: invalid stream %d", stream)
	}
	var n uint64
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(stream)}})
		defer it.Close()
		for it.Seek(appendKey(nil, stream, Key{Run: sel.MinRun, EventID: sel.MinEvent})); ; it.Next() {
			if _, found, _ := sel.advance(it, stream); !found {
				return nil
			}
			n++
		}
	})
	if err != nil {
		return 0, fmt.Errorf("store %s: %w", s.opts.Dir, err)
	}
	return n, nil
}

// errStop ends a List early when fn returns false.
var errStop = errors.New("stop")

// List calls fn with the metadata of each event of stream in the selection,
// in key order, until fn returns false or limit events (0: no limit) were
// listed.
func (s *Store) List(stream Stream, sel Selection, limit int, fn func(EventInfo) bool) error {
	if !stream.valid() {
		return fmt.Errorf("store list: invalid stream %d", stream)
	}
	n := 0
	var r record
	var buf []byte
	defer s.segs.endRead(s.segs.beginRead())
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(stream)}})
		defer it.Close()
		for it.Seek(appendKey(nil, stream, Key{Run: sel.MinRun, EventID: sel.MinEvent})); ; it.Next() {
			k, found, _ := sel.advance(it, stream)
			if !found {
				return nil
			}
			item := it.Item()
			var info EventInfo
			err := s.eventValue(item, &buf, func(v []byte) (err error) {
				info, err = infoOf(stream, k, v, &r)
				return err
			})
			if err != nil {
				return fmt.Errorf("%s run %d event %d: %w", stream, k.Run, k.EventID, err)
			}
			n++
			if !fn(info) || (limit > 0 && n >= limit) {
				return errStop
			}
		}
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("store %s: %w", s.opts.Dir, err)
	}
	return nil
}
