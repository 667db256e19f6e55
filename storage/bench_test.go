package storage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sluice-daq/sluice/internal/benchratio"
	"github.com/sluice-daq/sluice/schemas"
)

const (
	benchEvent = 100_000 // payload bytes per event
	benchBatch = 64      // events per write batch (6.4 MB, one fsync each)
)

// benchBatches builds n batches of benchBatch events with distinct ids;
// one source group, so each event's payload is benchEvent bytes.
func benchBatches(b *testing.B, n int) ([]*schemas.EventBatch, [][]schemas.Verdict) {
	return benchBatchesTB(b, n)
}

func benchBatchesTB(b testing.TB, n int) ([]*schemas.EventBatch, [][]schemas.Verdict) {
	var ebs []*schemas.EventBatch
	var ms [][]schemas.Verdict
	for k := 0; k < n; k++ {
		evs := genEvents(1, uint64(k*benchBatch), benchBatch, 1, benchEvent*3/4) // group 1 adds 1/3 of it
		rec := buildBatch(b, nil, evs)
		b.Cleanup(rec.Release)
		eb, _ := newView(b, rec)
		ebs = append(ebs, eb)
		ms = append(ms, metas(evs))
	}
	return ebs, ms
}

// rawWriter is the baseline: the same bytes appended to plain files with
// write(2), an fsync per batch, and a new file every 256 MiB (the store's
// value-log file size).
type rawWriter struct {
	dir  string
	f    *os.File
	n    int64
	file int
}

func (w *rawWriter) write(p []byte) error {
	if w.f == nil || w.n >= 256<<20 {
		if w.f != nil {
			w.f.Close()
		}
		w.file++
		f, err := os.Create(filepath.Join(w.dir, fmt.Sprintf("%06d.raw", w.file)))
		if err != nil {
			return err
		}
		w.f, w.n = f, 0
	}
	n, err := w.f.Write(p)
	w.n += int64(n)
	return err
}

// BenchmarkStoreWrite100kB: Put of 100 kB events in batches of 64 with
// SyncEveryBatch, against writing the same bytes to a raw file with an
// fsync per batch. One op is one event.
func BenchmarkStoreWrite100kB(b *testing.B) {
	ebs, ms := benchBatches(b, 4)
	s, err := Open(Options{Dir: b.TempDir(), MinFreeBytes: 4 << 30})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	raw := &rawWriter{dir: b.TempDir()}
	defer func() {
		if raw.f != nil {
			raw.f.Close()
		}
	}()
	evBytes := len(ebs[0].GroupPayload(0, 0)) + len(ebs[0].GroupPayload(1, 0))
	b.SetBytes(int64(evBytes))
	// Both sides write whole batches; the leftover ops of a chunk are
	// carried to the next one so that both do exactly the same work.
	var subjLeft, baseLeft, next int
	subject := func(ops int) {
		subjLeft += ops
		for subjLeft >= benchBatch {
			if _, err := s.Put(Deferred, ebs[next%len(ebs)], ms[next%len(ebs)], nil); err != nil {
				b.Fatal(err)
			}
			next++
			subjLeft -= benchBatch
		}
	}
	baseline := func(ops int) {
		baseLeft += ops
		for baseLeft >= benchBatch {
			eb := ebs[0]
			for i := 0; i < benchBatch; i++ {
				for g := range eb.Groups {
					if err := raw.write(eb.GroupPayload(g, i)); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := raw.f.Sync(); err != nil {
				b.Fatal(err)
			}
			baseLeft -= benchBatch
		}
	}
	benchratio.Compare(b, subject, baseline)
}

// BenchmarkReplayRead: replay cursor reading 100 kB deferred events as
// Arrow batches (hot page cache), against reading the same bytes back from
// a raw file into a reused buffer. One op is one event.
func BenchmarkReplayRead(b *testing.B) {
	const events = 2048 // 200 MB, read round and round
	ebs, ms := benchBatches(b, events/benchBatch)
	s, err := Open(Options{Dir: b.TempDir(), MinFreeBytes: 1 << 30, Sync: SyncNever})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rawPath := filepath.Join(b.TempDir(), "events.raw")
	rf, err := os.Create(rawPath)
	if err != nil {
		b.Fatal(err)
	}
	for k, eb := range ebs {
		if _, err := s.Put(Deferred, eb, ms[k], nil); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < eb.Len(); i++ {
			for g := range eb.Groups {
				rf.Write(eb.GroupPayload(g, i))
			}
		}
	}
	rf.Close()
	evBytes := len(ebs[0].GroupPayload(0, 0)) + len(ebs[0].GroupPayload(1, 0))
	b.SetBytes(int64(evBytes))

	var cur *Cursor
	var sink arrow.RecordBatch
	subject := func(ops int) {
		for ops > 0 {
			if cur == nil {
				if cur, err = s.NewCursor(Deferred, CursorOptions{BatchSize: benchBatch}); err != nil {
					b.Fatal(err)
				}
			}
			bt, err := cur.Next()
			if errors.Is(err, io.EOF) {
				cur.Close()
				cur = nil
				continue
			}
			if err != nil {
				b.Fatal(err)
			}
			ops -= bt.Events.Len()
			sink = bt.Rec
			bt.Release()
		}
	}
	rbuf := make([]byte, benchBatch*evBytes)
	var f *os.File
	baseline := func(ops int) {
		for ops > 0 {
			if f == nil {
				if f, err = os.Open(rawPath); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := io.ReadFull(f, rbuf); err != nil {
				f.Close()
				f = nil
				continue
			}
			ops -= benchBatch
		}
	}
	benchratio.Compare(b, subject, baseline)
	_ = sink
	if f != nil {
		f.Close()
	}
	if cur != nil {
		cur.Close()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
