package storage

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/sluice-daq/sluice/schemas"
)

// copyDir copies the regular files of src into a new temporary directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestStoreV1Readable opens a store of format version 1 written by the
// build before segment files (testdata/README.md): read-only it reads as
// it is; opened for writing it is marked version 2, its old events still
// read, new events go to segment files, and both survive a reopen.
func TestStoreV1Readable(t *testing.T) {
	check := func(s *Store, extra int) {
		t.Helper()
		keys, verdicts := readAll(t, s, Deferred, CursorOptions{})
		if len(keys) != 4+extra || keys[0] != (Key{Run: 1, EventID: 2}) {
			t.Fatalf("deferred: %v, want run 1 events 2..5 and %d more", keys, extra)
		}
		_ = verdicts
		acc, av := readAll(t, s, Accepted, CursorOptions{})
		if len(acc) != 4 || acc[0] != (Key{Run: 1, EventID: 0}) || av[0].Stage != "replay" {
			t.Fatalf("accepted: %v %+v, want run 1 event 0 (replayed, stage replay) and 100..102", acc, av)
		}
		led, err := s.Ledger()
		if err != nil || led != (Ledger{Accepted: 1, Rejected: 1}) {
			t.Fatalf("ledger %+v, %v", led, err)
		}
		st, err := s.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st.Streams[0].Bytes <= 4*4000 || st.Streams[1].Events != uint64(4+extra) {
			t.Fatalf("stats %+v", st.Streams)
		}
	}
	ro := copyDir(t, "testdata/store-v1")
	o := testOptions(ro)
	o.ReadOnly = true
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	check(s, 0)
	if v := s.schema.Load().ValueVersion; v != 1 {
		t.Fatalf("read-only open: format %d, want 1 left as it was", v)
	}
	s.Close()

	dir := copyDir(t, "testdata/store-v1")
	s, err = Open(testOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	if v := s.schema.Load().ValueVersion; v != FormatVersion {
		t.Fatalf("read-write open: format %d, want %d", v, FormatVersion)
	}
	evs := genEvents(1, 10, 3, 1, 3000)
	put(t, s, Deferred, evs)
	check(s, 3)
	s.Close()
	if ids, _ := listSegments(dir); len(ids) != 1 {
		t.Fatalf("segment files %v, want the one the new events went to", ids)
	}
	s, err = Open(testOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s, 3)
	// The new events read back whole.
	c, _ := s.NewCursor(Deferred, CursorOptions{Selection: Selection{MinEvent: 10}})
	defer c.Close()
	b, err := c.Next()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	for i, e := range evs {
		if err := checkRow(b.Events, b.Verdicts[i], i, e, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSegmentGCMoves: accepted and deferred events share segment files;
// once replay has rejected the deferred ones, GC copies the accepted
// events out of the mostly dead files and deletes them, and every accepted
// event reads back whole, also after a reopen.
func TestSegmentGCMoves(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir)
	o.ValueLogFileSize = 1 << 20 // segment files of ~1 MiB
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	var acc []testEvent
	for i := 0; i < 10; i++ {
		a := genEvents(1, uint64(1000+i*2), 2, 1, 30_000)
		acc = append(acc, a...)
		put(t, s, Accepted, a)
		put(t, s, Deferred, genEvents(1, uint64(i*20), 20, 1, 30_000))
	}
	c, _ := s.NewCursor(Deferred, CursorOptions{BatchSize: 50})
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
	// A reopen starts a new active file, so every file written is a
	// candidate.
	s.Close()
	if s, err = Open(o); err != nil {
		t.Fatal(err)
	}
	before, _ := listSegments(dir)
	_, sizeBefore, _ := s.guard.measure()
	n, err := s.RunGC()
	if err != nil {
		t.Fatal(err)
	}
	after, _ := listSegments(dir)
	_, sizeAfter, _ := s.guard.measure()
	t.Logf("GC: %d files removed or rewritten; segments %v -> %v; store %d -> %d bytes", n, before, after, sizeBefore, sizeAfter)
	if n == 0 || sizeAfter > sizeBefore/3 {
		t.Fatalf("GC removed or rewrote %d files, store %d -> %d bytes: want most of it reclaimed", n, sizeBefore, sizeAfter)
	}
	for _, id := range after {
		for _, old := range before {
			if id == old && id != after[len(after)-1] {
				t.Errorf("segment %d survived GC", id)
			}
		}
	}
	verify := func(s *Store) {
		t.Helper()
		c, _ := s.NewCursor(Accepted, CursorOptions{BatchSize: 100})
		defer c.Close()
		b, err := c.Next()
		if err != nil {
			t.Fatal(err)
		}
		defer b.Release()
		if b.Events.Len() != len(acc) {
			t.Fatalf("%d accepted events after GC, want %d", b.Events.Len(), len(acc))
		}
		for i, e := range acc {
			if err := checkRow(b.Events, b.Verdicts[i], i, e, 0); err != nil {
				t.Fatal(err)
			}
		}
		if n, _ := s.Count(Deferred, Selection{}); n != 0 {
			t.Fatalf("%d deferred events came back", n)
		}
	}
	verify(s)
	s.Close()
	if s, err = Open(o); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	verify(s)
}

// TestSegmentCorrupt: a flipped byte in a segment file is reported with
// the segment, the offset and ErrCRCMismatch, naming the event; a segment
// file that is gone is named too.
func TestSegmentCorrupt(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(testOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, Deferred, genEvents(1, 0, 3, 1, 5000))
	s.Close()
	path := filepath.Join(dir, segName(1))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-10] ^= 0xff // in the last event's payload
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = Open(testOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := s.NewCursor(Deferred, CursorOptions{})
	_, err = c.Next()
	c.Close()
	if !errors.Is(err, schemas.ErrCRCMismatch) || !strings.Contains(err.Error(), "event 2") || !strings.Contains(err.Error(), segName(1)) {
		t.Fatalf("reading a corrupt segment: %v, want ErrCRCMismatch naming event 2 and %s", err, segName(1))
	}
	s.Close()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	s, err = Open(testOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.List(Deferred, Selection{}, 0, func(EventInfo) bool { return true })
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), segName(1)) {
		t.Fatalf("listing with a segment file gone: %v, want ErrNotExist naming %s", err, segName(1))
	}
	// The index entries are pointers of the documented size.
	_ = s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(appendKey(nil, Deferred, Key{Run: 1, EventID: 0}))
		if err != nil || item.ValueSize() != ptrSize {
			t.Errorf("index entry: %v, %d bytes, want %d", err, item.ValueSize(), ptrSize)
		}
		return nil
	})
}

// TestDirtyOpenVerifiesLastSegment: after an unclean shutdown whose last
// segment file lost its tail (a machine crash between the fsync of the
// index and of the values), Open removes the index entries into the lost
// bytes, keeps the others, and says how many it removed; a clean open
// checks nothing.
func TestDirtyOpenVerifiesLastSegment(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(testOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, Deferred, genEvents(1, 0, 4, 1, 5000))
	s.Close()
	s, err = Open(testOptions(dir)) // a second file
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, Deferred, genEvents(1, 10, 4, 1, 5000))
	s.Close()
	path := filepath.Join(dir, segName(2))
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// The last event lost its end, the one before a byte in the middle.
	if err := os.Truncate(path, st.Size()-100); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	b[len(b)-8000] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = Open(testOptions(dir)) // clean: nothing verified
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Count(Deferred, Selection{}); n != 8 || s.Recovery().SegmentEntriesDropped != 0 {
		t.Fatalf("clean open: %d events, recovery %+v", n, s.Recovery())
	}
	s.Close()
	// The writer's lock file left behind: the previous writer did not close.
	if err := os.WriteFile(filepath.Join(dir, "LOCK"), []byte("12345\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = Open(testOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := s.Recovery()
	if !rec.Dirty || rec.SegmentEntriesDropped != 2 {
		t.Fatalf("dirty open: recovery %+v, want dirty and 2 entries dropped", rec)
	}
	keys, _ := readAll(t, s, Deferred, CursorOptions{})
	want := []Key{{1, 0}, {1, 1}, {1, 2}, {1, 3}, {1, 10}, {1, 11}}
	if len(keys) != len(want) {
		t.Fatalf("after recovery: %v, want %v", keys, want)
	}
	for i := range want {
		if keys[i] != want[i] {
			t.Fatalf("after recovery: %v, want %v", keys, want)
		}
	}
}

// TestScanDir: the two scans built on scanDir pick what they say, in name
// order, and a directory that does not exist yet (a new store) is empty,
// not an error.
func TestScanDir(t *testing.T) {
	dir := t.TempDir()
	for name, size := range map[string]int{"000002.vlog": 0, "000001.vlog": 3, "00001.mem": 0, "000003.sst": 0, segName(7): 1, segName(3): 0} {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	empty, err := emptyLogs(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "000002.vlog"), filepath.Join(dir, "00001.mem")} // name order
	if !slices.Equal(empty, want) {
		t.Errorf("emptyLogs = %v, want %v", empty, want)
	}
	if ids, err := listSegments(dir); err != nil || !slices.Equal(ids, []uint32{3, 7}) {
		t.Errorf("listSegments = %v, %v; want [3 7]", ids, err)
	}
	missing := filepath.Join(dir, "none")
	if l, err := emptyLogs(missing); l != nil || err != nil {
		t.Errorf("emptyLogs of a missing dir = %v, %v", l, err)
	}
	if ids, err := listSegments(missing); ids != nil || err != nil {
		t.Errorf("listSegments of a missing dir = %v, %v", ids, err)
	}
}
