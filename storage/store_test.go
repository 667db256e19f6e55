package storage

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/dgraph-io/badger/v4"

	"github.com/sluice-daq/sluice/schemas"
)

// TestRoundTrip writes events with every status bit and every decision,
// reads them back with a cursor and compares every field, and checks that
// the batches have exactly the builder's schema.
func TestRoundTrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := openTest(t, nil)
	bits := []schemas.EventStatus{0, schemas.StatusIncomplete, schemas.StatusCorrupt, schemas.StatusDuplicates,
		schemas.StatusSourceError, schemas.StatusTriggerError, schemas.StatusReplayed,
		schemas.StatusIncomplete | schemas.StatusCorrupt | schemas.StatusDuplicates | schemas.StatusSourceError | schemas.StatusTriggerError | schemas.StatusReplayed}
	decisions := []schemas.Decision{schemas.DecisionNone, schemas.DecisionAccept, schemas.DecisionReject, schemas.DecisionDefer}
	var evs []testEvent
	for i, st := range bits {
		for j, d := range decisions {
			e := genEvent(7, uint64(100+i*len(decisions)+j), 3000+i*17)
			e.status = st
			e.meta = schemas.Verdict{Decision: d, Lines: 1<<63 | uint64(i), Stage: "llt", Reason: schemas.Reason{Text: strings.Repeat("r", j*100)}}
			if st&schemas.StatusIncomplete != 0 {
				e.missing = []uint32{2, 11}
			}
			if st&schemas.StatusCorrupt != 0 {
				e.corrupt = []uint32{3}
			}
			evs = append(evs, e)
		}
	}
	evs = append(evs, genEvent(7, 1<<60, 0)) // empty payloads
	put(t, s, Deferred, evs)

	want, _ := schemas.EventSchema(schemas.ModeEvent, testGroups)
	c, err := s.NewCursor(Deferred, CursorOptions{BatchSize: 10, Mem: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := 0
	for {
		b, err := c.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !b.Rec.Schema().Equal(want) || !b.Rec.Schema().Metadata().Equal(want.Metadata()) {
			t.Fatalf("schema\n%s\nwant\n%s", b.Rec.Schema(), want)
		}
		if b.Events.Len() > 10 {
			t.Fatalf("batch of %d events, batch size 10", b.Events.Len())
		}
		for i := 0; i < b.Events.Len(); i++ {
			if err := checkRow(b.Events, b.Verdicts[i], i, evs[n], evs[n].status); err != nil {
				t.Error(err)
			}
			n++
		}
		b.Release()
	}
	if n != len(evs) {
		t.Fatalf("read %d events, wrote %d", n, len(evs))
	}
}

// TestOrderAndSelection checks (run, event id) order across runs written
// out of order, and run/event range selection.
func TestOrderAndSelection(t *testing.T) {
	s := openTest(t, nil)
	put(t, s, Deferred, genEvents(5, 1000, 10, 1, 100))
	put(t, s, Deferred, genEvents(3, 50, 10, 10, 100)) // ids 50..140
	put(t, s, Deferred, genEvents(5, 0, 5, 1, 100))
	put(t, s, Accepted, genEvents(4, 0, 3, 1, 100))
	// Writing events again replaces them, and says so.
	if ack := put(t, s, Deferred, genEvents(5, 1008, 4, 1, 100)); ack.Replaced != 2 || ack.Events != 4 {
		t.Fatalf("rewrite of events 1008..1011 (1008, 1009 stored): ack %+v, want 2 replaced", ack)
	}
	keys, _ := readAll(t, s, Deferred, CursorOptions{BatchSize: 4})
	if len(keys) != 27 {
		t.Fatalf("%d deferred events, want 27", len(keys))
	}
	for i := 1; i < len(keys); i++ {
		a, b := keys[i-1], keys[i]
		if a.Run > b.Run || (a.Run == b.Run && a.EventID >= b.EventID) {
			t.Fatalf("keys out of order at %d: %+v then %+v", i, a, b)
		}
	}
	for _, tc := range []struct {
		sel  Selection
		want int
	}{
		{Selection{MinRun: 5}, 17},
		{Selection{MaxRun: 3}, 10},
		{Selection{MinRun: 3, MaxRun: 3, MinEvent: 60, MaxEvent: 100}, 5},
		{Selection{MinEvent: 3, MaxEvent: 60}, 2 + 2},  // run 3: 50, 60; run 5: 3, 4
		{Selection{MinEvent: 1005, MaxEvent: 2000}, 7}, // run 5 only: 1005..1011
		{Selection{MinRun: 6}, 0},
	} {
		keys, _ := readAll(t, s, Deferred, CursorOptions{Selection: tc.sel, BatchSize: 3})
		if len(keys) != tc.want {
			t.Errorf("selection %+v: %d events %v, want %d", tc.sel, len(keys), keys, tc.want)
		}
		for _, k := range keys {
			if k.Run < tc.sel.MinRun || k.Run > tc.sel.maxRun() || k.EventID < tc.sel.MinEvent || k.EventID > tc.sel.maxEvent() {
				t.Errorf("selection %+v returned %+v", tc.sel, k)
			}
		}
	}
	acc, _ := readAll(t, s, Accepted, CursorOptions{})
	if len(acc) != 3 {
		t.Fatalf("%d accepted events, want 3 (streams must not mix)", len(acc))
	}
}

// TestMaxBatchBytes checks that a batch stops before passing the byte cap
// but always holds at least one event.
func TestMaxBatchBytes(t *testing.T) {
	s := openTest(t, nil)
	put(t, s, Deferred, genEvents(1, 0, 10, 1, 30_000)) // ~40 kB values
	c, _ := s.NewCursor(Deferred, CursorOptions{MaxBatchBytes: 100_000})
	defer c.Close()
	var sizes []int
	for {
		b, err := c.Next()
		if err != nil {
			break
		}
		sizes = append(sizes, b.Events.Len())
		if b.Bytes > 100_000 {
			t.Errorf("batch of %d bytes, cap 100000", b.Bytes)
		}
		b.Release()
	}
	if len(sizes) != 5 || sizes[0] != 2 {
		t.Fatalf("batch sizes %v, want 5 batches of 2", sizes)
	}
	c2, _ := s.NewCursor(Deferred, CursorOptions{MaxBatchBytes: 1})
	defer c2.Close()
	b, err := c2.Next()
	if err != nil || b.Events.Len() != 1 {
		t.Fatalf("cap below one event: %v, want a batch of one event", err)
	}
	b.Release()
}

// TestReopenKeepsSchema checks that a reopened store rebuilds the schema
// from its meta record and refuses batches of another schema.
func TestReopenKeepsSchema(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(testOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	evs := genEvents(1, 0, 3, 1, 500)
	put(t, s, Accepted, evs)
	s.Close()
	s, err = Open(testOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ := s.NewCursor(Accepted, CursorOptions{})
	defer c.Close()
	want, _ := schemas.EventSchema(schemas.ModeEvent, testGroups)
	if c.Schema() == nil || !c.Schema().Equal(want) {
		t.Fatalf("reopened schema %v, want %v", c.Schema(), want)
	}
	other, _ := schemas.EventSchema(schemas.ModeEvent, testGroups[:1])
	rec := buildOther(t, other)
	defer rec.Release()
	eb, err := schemas.NewEventBatch(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(Accepted, eb, make([]schemas.Verdict, eb.Len()), nil); !errors.Is(err, ErrSchemaMismatch) {
		t.Fatalf("put with other groups: %v, want ErrSchemaMismatch", err)
	}
}

// TestUnknownValueVersion writes an event whose index entry has a version
// byte neither a value (1) nor a pointer (2) has and checks that reading
// it is refused with the version named, and that a store whose schema
// record names another format version is not opened.
func TestUnknownValueVersion(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(testOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, Deferred, genEvents(1, 0, 2, 1, 2000))
	err = s.db.Update(func(txn *badger.Txn) error {
		k := appendKey(nil, Deferred, Key{Run: 1, EventID: 1})
		item, err := txn.Get(k)
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		v[0] = ptrVersion + 1
		return txn.Set(k, v)
	})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := s.NewCursor(Deferred, CursorOptions{})
	_, err = c.Next()
	c.Close()
	if !errors.Is(err, schemas.ErrBadVersion) || !strings.Contains(err.Error(), "version 3") || !strings.Contains(err.Error(), "event 1") {
		t.Fatalf("reading a version-3 entry: %v, want ErrBadVersion naming version 3 and the event", err)
	}
	var de *schemas.DecodeError
	if !errors.As(err, &de) || de.Offset != 0 {
		t.Fatalf("error %v is not a DecodeError at offset 0", err)
	}
	if err := s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(metaSchemaKey, []byte(`{"value_version":3,"mode":"event","groups":[]}`))
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = Open(testOptions(dir))
	if !errors.Is(err, ErrStoreVersion) || !strings.Contains(err.Error(), "(value_version) 3") {
		t.Fatalf("open of a version-3 store: %v, want ErrStoreVersion naming version 3", err)
	}
}

// buildOther builds a one-event batch with schema (metadata columns and
// one source group).
func buildOther(t *testing.T, schema *arrow.Schema) arrow.RecordBatch {
	t.Helper()
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer rb.Release()
	rb.Field(0).(*array.Uint64Builder).Append(1)
	rb.Field(1).(*array.Uint32Builder).Append(1)
	rb.Field(2).(*array.Uint64Builder).Append(1)
	rb.Field(3).(*array.Uint32Builder).Append(0)
	rb.Field(4).(*array.Uint32Builder).Append(0)
	rb.Field(5).(*array.ListBuilder).Append(true)
	rb.Field(6).(*array.ListBuilder).Append(true)
	rb.Field(7).(*array.BinaryBuilder).Append(nil)
	rb.Field(8).(*array.ListBuilder).Append(true)
	return rb.NewRecordBatch()
}

// TestEmptyLogLeftByKill: a zero-length memtable file (a writer killed
// while creating it) makes a read-only open ask for recovery, and a
// read-write open removes it and opens the store with its events.
func TestEmptyLogLeftByKill(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(testOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, Deferred, genEvents(1, 0, 3, 1, 2000))
	s.Close()
	if err := os.WriteFile(filepath.Join(dir, "00099.mem"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ro := testOptions(dir)
	ro.ReadOnly = true
	if _, err := Open(ro); !errors.Is(err, ErrNeedsRecovery) || !strings.Contains(err.Error(), "00099.mem") {
		t.Fatalf("read-only open with an empty memtable file: %v, want ErrNeedsRecovery naming it", err)
	}
	s, err = Open(testOptions(dir))
	if err != nil {
		t.Fatalf("read-write open with an empty memtable file: %v", err)
	}
	defer s.Close()
	if keys, _ := readAll(t, s, Deferred, CursorOptions{}); len(keys) != 3 {
		t.Fatalf("%d events after recovery, want 3", len(keys))
	}
}
