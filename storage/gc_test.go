package storage

import (
	"testing"

	"github.com/sluice-daq/sluice/schemas"
)

// TestGCNoReappearance writes deferred events over several value-log
// files, removes them as replay does (Commit with reject), runs value-log
// GC, closes and reopens: none of them may come back (badger issue #2286
// brought deleted keys back after GC in older releases).
func TestGCNoReappearance(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir)
	o.ValueLogFileSize = 1 << 20 // many small value-log files to collect
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 12; i++ {
		put(t, s, Deferred, genEvents(1, uint64(i*20), 20, 1, 30_000))
	}
	keep := genEvents(2, 0, 3, 1, 30_000)
	put(t, s, Deferred, keep)
	c, _ := s.NewCursor(Deferred, CursorOptions{Selection: Selection{MaxRun: 1}, BatchSize: 50})
	for {
		b, err := c.Next()
		if err != nil {
			break
		}
		out := make([]schemas.Verdict, b.Events.Len())
		for i := range out {
			out[i] = schemas.Verdict{Decision: schemas.DecisionReject}
		}
		if _, err := s.Commit(b, out); err != nil {
			t.Fatal(err)
		}
		b.Release()
	}
	c.Close()
	_, before, _ := s.guard.measure()
	// Removals reach the value log's discard statistics when their memtable
	// is flushed and compacted: Close does both.
	s.Close()
	if s, err = Open(o); err != nil {
		t.Fatal(err)
	}
	n, err := s.RunGC()
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := s.guard.measure()
	s.Close()
	if n == 0 {
		t.Fatalf("GC rewrote no value-log file (store %d bytes)", before)
	}
	t.Logf("GC rewrote %d value-log files; store %d -> %d bytes", n, before, after)
	if s, err = Open(o); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	keys, _ := readAll(t, s, Deferred, CursorOptions{})
	if len(keys) != len(keep) {
		t.Fatalf("after GC and reopen: deferred events %v, want only run 2 events 0..2", keys)
	}
	for i, k := range keys {
		if k != (Key{Run: 2, EventID: uint64(i)}) {
			t.Fatalf("after GC and reopen: %+v came back", k)
		}
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Ledger.Rejected != 240 || st.Streams[1].Events != 3 {
		t.Fatalf("stats after GC: ledger %+v, deferred %d events", st.Ledger, st.Streams[1].Events)
	}
}
