package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
	"github.com/sluice-daq/sluice/schemas/table"
)

// exportFixture stores 25 accepted events over two runs and returns them.
func exportFixture(t *testing.T) (*Store, []testEvent) {
	s := openTest(t, nil)
	evs := append(genEvents(1, 0, 15, 1, 3000), genEvents(2, 100, 10, 2, 3000)...)
	for i := range evs {
		evs[i].meta = schemas.Verdict{Decision: schemas.DecisionAccept, Lines: uint64(i), Fired: uint64(i) | 1<<40, Stage: "hlt1", Plugin: exportPlugin}
		evs[i].status = schemas.StatusCorrupt
		evs[i].corrupt = []uint32{uint32(i)}
		if i%3 == 0 {
			evs[i].dups, evs[i].lates = []uint32{1, uint32(i) + 100}, []uint32{11}
		}
	}
	put(t, s, Accepted, evs[:15])
	put(t, s, Accepted, evs[15:])
	return s, evs
}

// exportPlugin is the fixture's plugin: the provenance column names it.
var exportPlugin = &schemas.PluginID{Stage: "hlt1", Name: "passthrough", Version: "1.0.0", Digest: strings.Repeat("ab", 32)}

// checkExported compares a table read back from an export with the events.
func checkExported(t *testing.T, tbl arrow.Table, evs []testEvent) {
	t.Helper()
	want, _ := schemas.EventSchema(schemas.ModeEvent, testGroups)
	if tbl.NumRows() != int64(len(evs)) || tbl.NumCols() != int64(len(want.Fields())+6) {
		t.Fatalf("%d rows × %d columns, want %d × %d", tbl.NumRows(), tbl.NumCols(), len(evs), len(want.Fields())+6)
	}
	for i, f := range want.Fields() {
		if got := tbl.Schema().Field(i); got.Name != f.Name || !arrow.TypeEqual(got.Type, f.Type) {
			t.Fatalf("column %d is %s %s, want %s %s", i, got.Name, got.Type, f.Name, f.Type)
		}
	}
	tr := array.NewTableReader(tbl, 1000)
	defer tr.Release()
	row := 0
	for tr.Next() {
		rec := tr.RecordBatch()
		evRec := array.NewRecordBatch(want, rec.Columns()[:len(want.Fields())], rec.NumRows())
		defer evRec.Release()
		ev, err := schemas.NewEventBatch(evRec)
		if err != nil {
			t.Fatal(err)
		}
		dec := rec.Column(len(want.Fields())).(*array.Uint8)
		lines := rec.Column(len(want.Fields()) + 1).(*array.Uint64)
		stage := rec.Column(len(want.Fields()) + 2).(*array.String)
		prov := rec.Column(len(want.Fields()) + 4).(*array.List)
		built := rec.Column(len(want.Fields()) + 5).(*array.Struct)
		ids := func(k, i int) []uint32 {
			l := built.Field(k).(*array.List)
			from, to := l.ValueOffsets(i)
			return slices.Clone(l.ListValues().(*array.Uint32).Uint32Values()[from:to])
		}
		steps := prov.ListValues().(*array.Struct)
		field := func(name string) arrow.Array {
			k, _ := steps.DataType().(*arrow.StructType).FieldIdx(name)
			return steps.Field(k)
		}
		for i := 0; i < ev.Len(); i++ {
			m := schemas.Verdict{Decision: schemas.Decision(dec.Value(i)), Lines: lines.Value(i), Stage: stage.Value(i)}
			if err := checkRow(ev, m, i, evs[row], schemas.StatusCorrupt); err != nil {
				t.Fatal(err)
			}
			// One online step: the plugin, the lines before and after the prescales.
			from, to := prov.ValueOffsets(i)
			e := evs[row].meta
			if to-from != 1 || field("stage").(*array.String).Value(int(from)) != "hlt1" ||
				field("sha256").(*array.String).Value(int(from)) != exportPlugin.Digest ||
				field("version").(*array.String).Value(int(from)) != "1.0.0" ||
				field("replay").(*array.Boolean).Value(int(from)) ||
				field("lines_fired").(*array.Uint64).Value(int(from)) != e.Fired ||
				field("lines_kept").(*array.Uint64).Value(int(from)) != e.Lines ||
				field("at_ns").(*array.Uint64).Value(int(from)) == 0 {
				t.Fatalf("event %d: provenance column rows %d..%d: %v", evs[row].id, from, to, prov.String())
			}
			// The build: duplicated and late sources, no farm.
			if d, l := ids(0, i), ids(1, i); !slices.Equal(d, evs[row].dups) || !slices.Equal(l, evs[row].lates) ||
				built.Field(2).(*array.String).Value(i) != "" || built.Field(4).(*array.Uint64).Value(i) != 0 {
				t.Fatalf("event %d: built column duplicated %v late %v (want %v %v): %v", evs[row].id, d, l, evs[row].dups, evs[row].lates, built)
			}
			row++
		}
	}
	if row != len(evs) {
		t.Fatalf("read %d rows, want %d", row, len(evs))
	}
}

// TestExportArrow exports to an Arrow IPC file and reads it back with the
// Arrow Go IPC file reader.
func TestExportArrow(t *testing.T) {
	s, evs := exportFixture(t)
	path := filepath.Join(t.TempDir(), "x.arrow")
	f, _ := os.Create(path)
	n, err := s.Export(Accepted, exporter(t, table.ArrowFormat), f, ExportOptions{})
	f.Close()
	if err != nil || n != len(evs) {
		t.Fatalf("export: %d events, %v", n, err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	f, _ = os.Open(path)
	defer f.Close()
	r, err := ipc.NewFileReader(f, ipc.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var recs []arrow.RecordBatch
	for i := 0; i < r.NumRecords(); i++ {
		rec, err := r.RecordBatch(i)
		if err != nil {
			t.Fatal(err)
		}
		rec.Retain()
		defer rec.Release()
		recs = append(recs, rec)
	}
	tbl := array.NewTableFromRecords(r.Schema(), recs)
	defer tbl.Release()
	checkExported(t, tbl, evs)
}

// TestExportParquet exports to Parquet and reads it back with pqarrow.
func TestExportParquet(t *testing.T) {
	s, evs := exportFixture(t)
	var buf bytes.Buffer
	n, err := s.Export(Accepted, exporter(t, table.ParquetFormat), &buf, ExportOptions{})
	if err != nil || n != len(evs) {
		t.Fatalf("export: %d events, %v", n, err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	tbl, err := pqarrow.ReadTable(context.Background(), bytes.NewReader(buf.Bytes()), nil, pqarrow.ArrowReadProperties{}, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	checkExported(t, tbl, evs)
	pf, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	if pf.NumRows() != int64(len(evs)) {
		t.Fatalf("parquet footer says %d rows, want %d", pf.NumRows(), len(evs))
	}
}

// exporter is how f exports.
func exporter(t *testing.T, f format.Format) format.Exporter {
	t.Helper()
	e, ok := format.ExportOf(f)
	if !ok {
		t.Fatalf("%s does not export", f.Name())
	}
	return e
}

// idFormat is a format whose records are an event's id, 8 bytes; its
// joiner fails on event failOn (when not 0).
type idFormat struct{ failOn uint64 }

func (idFormat) Name() string                                        { return "test-ids" }
func (idFormat) Sign() string                                        { return "event ids" }
func (idFormat) Detect([]byte) format.Match                          { return format.NoMatch }
func (idFormat) Inspect(*format.Stream, int) (*format.Report, error) { return nil, nil }
func (idFormat) ExportName() string                                  { return "ids" }
func (f idFormat) NewJoiner() format.EventJoiner                     { return f }

func (f idFormat) Join(dst []byte, eb *schemas.EventBatch, i int) ([]byte, error) {
	if eb.EventID(i) == f.failOn {
		return dst, schemas.ErrInconsistent
	}
	return binary.LittleEndian.AppendUint64(dst, eb.EventID(i)), nil
}

// TestExportJoinerAndSelection exports through a joiner, one record per
// event, with a selection and a limit; a row that does not join stops
// the export naming its run and event.
func TestExportJoinerAndSelection(t *testing.T) {
	s, _ := exportFixture(t)
	var buf bytes.Buffer
	n, err := s.Export(Accepted, exporter(t, idFormat{}), &buf, ExportOptions{Selection: Selection{MinRun: 2, MinEvent: 104}, Limit: 3})
	if err != nil || n != 3 || buf.Len() != 24 {
		t.Fatalf("export: %d events in %d bytes, %v", n, buf.Len(), err)
	}
	want := []uint64{104, 106, 108}
	for i, w := range want {
		if got := binary.LittleEndian.Uint64(buf.Bytes()[8*i:]); got != w {
			t.Fatalf("record %d is event %d, want %d", i, got, w)
		}
	}
	buf.Reset()
	_, err = s.Export(Accepted, exporter(t, idFormat{failOn: 106}), &buf, ExportOptions{})
	if !errors.Is(err, schemas.ErrInconsistent) || !strings.Contains(err.Error(), "export ids: run 2 event 106") {
		t.Fatalf("error %v, want one naming run 2 event 106", err)
	}
}
