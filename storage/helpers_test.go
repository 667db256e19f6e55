package storage

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/schemas"
)

// testGroups are two source groups, like two sub-detectors.
var testGroups = []schemas.SourceGroup{
	{Name: "velo", Sources: []uint32{1, 2, 3}},
	{Name: "calo", Sources: []uint32{10, 11}},
}

// testEvent is one event as a test writes it and expects it back.
type testEvent struct {
	run      uint32
	id       uint64
	ts       uint64
	status   schemas.EventStatus
	nfrag    uint32
	missing  []uint32
	corrupt  []uint32
	dups     []uint32   // duplicate_sources (build columns)
	lates    []uint32   // late_sources
	asg      uint64     // assignment
	payloads [][]byte   // per group: payloads back to back
	sizes    [][]uint32 // per group: one size per source
	meta     schemas.Verdict
}

// genEvent makes a deterministic event whose payload bytes depend on its
// run and id, so that a mixed-up payload is detected. size is the payload
// bytes of group 0 (group 1 gets a third of it).
func genEvent(run uint32, id uint64, size int) testEvent {
	e := testEvent{run: run, id: id, ts: 1_700_000_000_000_000_000 + id*1000, nfrag: 5,
		meta: schemas.Verdict{Decision: schemas.DecisionDefer, Lines: id * 0x9E3779B97F4A7C15, Stage: "hlt1", Reason: schemas.Reason{Text: "backlog"}}}
	for g, grp := range testGroups {
		n := size
		if g == 1 {
			n = size / 3
		}
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(uint64(i)*31 + id*7 + uint64(run) + uint64(g))
		}
		sz := make([]uint32, len(grp.Sources))
		left := n
		for k := range sz {
			if k == len(sz)-1 {
				sz[k] = uint32(left)
			} else {
				sz[k] = uint32(n / len(sz))
				left -= n / len(sz)
			}
		}
		e.payloads = append(e.payloads, p)
		e.sizes = append(e.sizes, sz)
	}
	return e
}

// genEvents makes n events of run with ids first, first+step, ...
func genEvents(run uint32, first uint64, n, step, size int) []testEvent {
	out := make([]testEvent, n)
	for i := range out {
		out[i] = genEvent(run, first+uint64(i*step), size)
	}
	return out
}

// buildBatch builds an event batch with plain Arrow builders (independent
// of the store's own row builder), with the builder's build columns.
func buildBatch(t testing.TB, mem memory.Allocator, evs []testEvent) arrow.RecordBatch {
	t.Helper()
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	schema, err := schemas.BuilderSchema(schemas.ModeEvent, testGroups)
	if err != nil {
		t.Fatal(err)
	}
	rb := array.NewRecordBuilder(mem, schema)
	defer rb.Release()
	u32list := func(b array.Builder, v []uint32) {
		lb := b.(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.Uint32Builder).AppendValues(v, nil)
	}
	for _, e := range evs {
		rb.Field(0).(*array.Uint64Builder).Append(e.id)
		rb.Field(1).(*array.Uint32Builder).Append(e.run)
		rb.Field(2).(*array.Uint64Builder).Append(e.ts)
		rb.Field(3).(*array.Uint32Builder).Append(uint32(e.status))
		rb.Field(4).(*array.Uint32Builder).Append(e.nfrag)
		u32list(rb.Field(5), e.missing)
		u32list(rb.Field(6), e.corrupt)
		for g := range testGroups {
			rb.Field(7 + 2*g).(*array.BinaryBuilder).Append(e.payloads[g])
			u32list(rb.Field(8+2*g), e.sizes[g])
		}
		b := 7 + 2*len(testGroups)
		u32list(rb.Field(b), e.dups)
		u32list(rb.Field(b+1), e.lates)
		rb.Field(b + 2).(*array.Uint64Builder).Append(e.asg)
	}
	return rb.NewRecordBatch()
}

func metas(evs []testEvent) []schemas.Verdict {
	out := make([]schemas.Verdict, len(evs))
	for i, e := range evs {
		out[i] = e.meta
	}
	return out
}

// put writes evs to stream and fails the test on error.
func put(t testing.TB, s *Store, stream Stream, evs []testEvent) Ack {
	t.Helper()
	rec := buildBatch(t, memory.DefaultAllocator, evs)
	defer rec.Release()
	eb, err := schemas.NewEventBatch(rec)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := s.Put(stream, eb, metas(evs), nil)
	if err != nil {
		t.Fatal(err)
	}
	return ack
}

// checkRow compares row i of a batch read back with the event written.
func checkRow(eb *schemas.EventBatch, meta schemas.Verdict, i int, e testEvent, wantStatus schemas.EventStatus) error {
	switch {
	case eb.Run(i) != e.run || eb.EventID(i) != e.id:
		return fmt.Errorf("row %d is run %d event %d, want run %d event %d", i, eb.Run(i), eb.EventID(i), e.run, e.id)
	case eb.Timestamp(i) != e.ts:
		return fmt.Errorf("event %d: timestamp %d, want %d", e.id, eb.Timestamp(i), e.ts)
	case eb.Status(i) != wantStatus:
		return fmt.Errorf("event %d: status %#x, want %#x", e.id, eb.Status(i), wantStatus)
	case uint32(eb.NumFragments(i)) != e.nfrag:
		return fmt.Errorf("event %d: %d fragments, want %d", e.id, eb.NumFragments(i), e.nfrag)
	case !equalU32(eb.MissingSources(i), e.missing) || !equalU32(eb.CorruptSources(i), e.corrupt):
		return fmt.Errorf("event %d: missing %v corrupt %v, want %v %v", e.id, eb.MissingSources(i), eb.CorruptSources(i), e.missing, e.corrupt)
	case meta.Decision != e.meta.Decision || meta.Lines != e.meta.Lines || meta.Stage != e.meta.Stage || meta.Reason != e.meta.Reason || meta.Status != e.meta.Status:
		return fmt.Errorf("event %d: meta %+v, want %+v", e.id, meta, e.meta)
	}
	for g := range testGroups {
		if !bytes.Equal(eb.GroupPayload(g, i), e.payloads[g]) {
			return fmt.Errorf("event %d group %d: payload differs (%d bytes, want %d)", e.id, g, len(eb.GroupPayload(g, i)), len(e.payloads[g]))
		}
		if !equalU32(eb.GroupSizes(g, i), e.sizes[g]) {
			return fmt.Errorf("event %d group %d: sizes %v, want %v", e.id, g, eb.GroupSizes(g, i), e.sizes[g])
		}
	}
	return nil
}

func equalU32(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// openTest opens a store in a fresh temporary directory with small badger
// sizes so that tests stay light.
func openTest(t testing.TB, mod func(*Options)) *Store {
	t.Helper()
	o := testOptions(t.TempDir())
	if mod != nil {
		mod(&o)
	}
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func testOptions(dir string) Options {
	return Options{Dir: dir, MinFreeBytes: 1 << 20, MemTableSize: 8 << 20, ValueLogFileSize: 16 << 20}
}

// readAll reads every event of stream and returns the batches' contents
// flattened as (key -> row check func input).
func readAll(t testing.TB, s *Store, stream Stream, opts CursorOptions) (keys []Key, metas []schemas.Verdict) {
	t.Helper()
	c, err := s.NewCursor(stream, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for {
		b, err := c.Next()
		if err != nil {
			if err.Error() == "EOF" {
				return keys, metas
			}
			t.Fatal(err)
		}
		for i := 0; i < b.Events.Len(); i++ {
			keys = append(keys, Key{Run: b.Events.Run(i), EventID: b.Events.EventID(i)})
		}
		metas = append(metas, b.Verdicts...)
		b.Release()
	}
}

func newView(t testing.TB, rec arrow.RecordBatch) (*schemas.EventBatch, error) {
	t.Helper()
	eb, err := schemas.NewEventBatch(rec)
	if err != nil {
		t.Fatal(err)
	}
	return eb, nil
}

// putInline writes evs as a store of format version 1 held them: each
// event value in badger itself (its value log), no segment file. The
// schema record is written (as version 1) if the store has none.
func putInline(t testing.TB, s *Store, stream Stream, evs []testEvent) {
	t.Helper()
	rec := buildBatch(t, memory.DefaultAllocator, evs)
	defer rec.Release()
	eb, err := schemas.NewEventBatch(rec)
	if err != nil {
		t.Fatal(err)
	}
	ms := metas(evs)
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	if s.schema.Load() == nil {
		ss := newStoreSchema(eb.Mode, eb.Groups)
		ss.ValueVersion = 1
		b, err := encodeStoreSchema(ss)
		if err != nil {
			t.Fatal(err)
		}
		if err := wb.Set(metaSchemaKey, b); err != nil {
			t.Fatal(err)
		}
		s.schema.Store(ss)
	}
	for i := 0; i < eb.Len(); i++ {
		k := appendKey(nil, stream, Key{Run: eb.Run(i), EventID: eb.EventID(i)})
		if err := wb.Set(k, appendValue(nil, eb, i, &ms[i], eb.Status(i)|ms[i].Status)); err != nil {
			t.Fatal(err)
		}
	}
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
}
