package inspect

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
	"github.com/sluice-daq/sluice/schemas/table"
)

// t0 is the arrival time of the first sample event.
var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// eventTable builds two batches of the event schema (groups ecal: 10,11
// and muon: 20) with, when export is set, the decision column that
// `sluice store export` adds. Events 100..102 of run 7 in the first batch,
// 103 of run 8 in the second; 101 lacks source 11 and has a corrupt 20.
func eventTable(t testing.TB, mem memory.Allocator, export bool) (*arrow.Schema, []arrow.RecordBatch) {
	t.Helper()
	s, err := schemas.EventSchema(schemas.ModeEvent, []schemas.SourceGroup{{Name: "ecal", Sources: []uint32{10, 11}}, {Name: "muon", Sources: []uint32{20}}})
	if err != nil {
		t.Fatal(err)
	}
	if export {
		md := s.Metadata()
		s = arrow.NewSchema(append(s.Fields(), arrow.Field{Name: schemas.ColDecision, Type: arrow.PrimitiveTypes.Uint8}), &md)
	}
	type ev struct {
		id               uint64
		run              uint32
		status           schemas.EventStatus
		missing, corrupt []uint32
		ecal             []uint32 // payload sizes of 10, 11
		muon             uint32
		decision         schemas.Decision
	}
	batches := [][]ev{
		{
			{id: 100, run: 7, ecal: []uint32{3, 2}, muon: 1, decision: schemas.DecisionAccept},
			{id: 101, run: 7, status: schemas.StatusIncomplete | schemas.StatusCorrupt, missing: []uint32{11}, corrupt: []uint32{20}, ecal: []uint32{4, 0}, muon: 2, decision: schemas.DecisionReject},
			{id: 102, run: 7, ecal: []uint32{5, 5}, muon: 5, decision: schemas.DecisionAccept},
		},
		{{id: 103, run: 8, ecal: []uint32{1, 1}, muon: 1, decision: schemas.DecisionDefer}},
	}
	var recs []arrow.RecordBatch
	rb := array.NewRecordBuilder(mem, s)
	defer rb.Release()
	list := func(col int, vals []uint32) {
		lb := rb.Field(col).(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.Uint32Builder).AppendValues(vals, nil)
	}
	payload := func(col int, sizes ...uint32) {
		n := 0
		for _, s := range sizes {
			n += int(s)
		}
		rb.Field(col).(*array.BinaryBuilder).Append(bytes.Repeat([]byte{'x'}, n))
	}
	for _, b := range batches {
		for _, e := range b {
			rb.Field(0).(*array.Uint64Builder).Append(e.id)
			rb.Field(1).(*array.Uint32Builder).Append(e.run)
			rb.Field(2).(*array.Uint64Builder).Append(uint64(t0.Add(time.Duration(e.id-100) * time.Millisecond).UnixNano()))
			rb.Field(3).(*array.Uint32Builder).Append(uint32(e.status))
			rb.Field(4).(*array.Uint32Builder).Append(uint32(3 - len(e.missing)))
			list(5, e.missing)
			list(6, e.corrupt)
			payload(7, e.ecal...)
			list(8, e.ecal)
			payload(9, e.muon)
			list(10, []uint32{e.muon})
			if export {
				rb.Field(11).(*array.Uint8Builder).Append(uint8(e.decision))
			}
		}
		recs = append(recs, rb.NewRecordBatch())
	}
	return s, recs
}

func release(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

func arrowFile(t testing.TB, mem memory.Allocator, s *arrow.Schema, recs []arrow.RecordBatch) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := ipc.NewFileWriter(&b, ipc.WithSchema(s), ipc.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// parquetFile writes recs as `sluice store export` does: no dictionary,
// the Arrow schema stored; Write makes one row group per batch.
func parquetFile(t testing.TB, mem memory.Allocator, s *arrow.Schema, recs []arrow.RecordBatch) []byte {
	t.Helper()
	var b bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithDictionaryDefault(false), parquet.WithAllocator(mem))
	w, err := pqarrow.NewFileWriter(s, &b, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(mem)))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs { // Write makes a row group of each batch
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestInspectTables(t *testing.T) {
	for _, c := range []struct {
		f     string
		write func(testing.TB, memory.Allocator, *arrow.Schema, []arrow.RecordBatch) []byte
		unit  string
	}{{"arrow-ipc", arrowFile, "record batches"}, {"parquet", parquetFile, "row groups"}} {
		t.Run(c.f, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			s, recs := eventTable(t, mem, true)
			b := c.write(t, mem, s, recs)
			release(recs)
			if got := detect(b); got != c.f {
				t.Fatalf("Detect = %q, want %q", got, c.f)
			}
			rep, err := inspectWith(bytes.NewReader(b), 2, mem)
			if err != nil {
				t.Fatal(err)
			}
			tr, ok := rep.Section.(*table.Report)
			if rep.Format != c.f || rep.Bytes != int64(len(b)) || rep.Records != 2 || rep.Events != 4 || !slices.Equal(rep.Sources, []uint32{10, 11, 20}) || !ok {
				t.Fatalf("report %+v", rep)
			}
			if !tr.EventTable || tr.Rows != 4 || tr.Mode != "event" || len(tr.Columns) != 12 || tr.Columns[11] != (table.Column{Name: "decision", Type: "uint8"}) ||
				!slices.Equal(tr.Runs, []uint32{7, 8}) || tr.EventIDRange != [2]uint64{100, 103} ||
				tr.Status["incomplete"] != 1 || tr.Status["corrupt"] != 1 || len(tr.Status) != 2 ||
				tr.Decisions["accept"] != 2 || tr.Decisions["reject"] != 1 || tr.Decisions["defer"] != 1 ||
				tr.PayloadBytes != (format.SizeStats{Min: 3, Median: 6, Max: 15}) {
				t.Fatalf("table %+v", tr)
			}
			if !slices.Equal(tr.Groups, []table.SourceGroup{{Name: "ecal", Sources: "10-11", NumSources: 2}, {Name: "muon", Sources: "20", NumSources: 1}}) {
				t.Fatalf("groups %+v", tr.Groups)
			}
			if !rep.Start.Equal(t0) || !rep.End.Equal(t0.Add(3*time.Millisecond)) {
				t.Fatalf("time range %v .. %v", rep.Start, rep.End)
			}
			rs, _ := rep.Detail.Rows.([]table.RowDetail)
			if rep.Detail == nil || rep.Detail.Of != "events" || len(rs) != 2 {
				t.Fatalf("detail %+v", rep.Detail)
			}
			d := rs[1]
			if d.Index != 1 || d.EventID != 101 || d.Run != 7 || d.Fragments != 2 || d.PayloadBytes != 6 || d.Decision != "reject" ||
				!slices.Equal(d.Status, []string{"incomplete", "corrupt"}) || !slices.Equal(d.MissingSources, []uint32{11}) || !slices.Equal(d.CorruptSources, []uint32{20}) {
				t.Fatalf("row %+v", d)
			}
			text := squeeze(writeText(t, rep))
			for _, want := range []string{"format: " + c.f, "bytes: " + strconv.Itoa(len(b)) + " in 2 " + c.unit, "events: 4", "sources: 3: 10-11,20",
				"rows: 4", "columns: 12: event_id uint64, run uint32,", "decision uint8", "event table: yes, mode event",
				"source group ecal: 2 sources: 10-11", "source group muon: 1 source: 20", "runs: 7-8", "event ids: 100 .. 103",
				"payload bytes per event: min 3, median 6, max 15", "status: corrupt: 1, incomplete: 1", "decisions: accept: 2, defer: 1, reject: 1",
				"time range: 2026-11-30T09:00:00Z .. 2026-11-30T09:00:00.003Z",
				"# event id run time fragments payload bytes status missing corrupt decision",
				"\n1 101 7 2026-11-30T09:00:00.001Z 2 6 incomplete,corrupt 11 20 reject"} {
				if !strings.Contains(text, want) {
					t.Errorf("text lacks %q:\n%s", want, text)
				}
			}
			if strings.Contains(text, "record sizes") {
				t.Errorf("record sizes of a table:\n%s", text)
			}
			// A stream that cannot seek is read into memory first.
			rep, err = inspectWith(struct{ io.Reader }{bytes.NewReader(b)}, 0, mem)
			if err != nil || rep.Events != 4 || rep.Detail != nil {
				t.Fatalf("from a plain reader: %+v, %v", rep, err)
			}
		})
	}
}

// TestInspectTableFile reads through an *os.File, from where it stands.
func TestInspectTableFile(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s, recs := eventTable(t, mem, false)
	b := arrowFile(t, mem, s, recs)
	release(recs)
	p := filepath.Join(t.TempDir(), "events.arrow")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := inspectWith(f, 1, mem)
	if tr := rep.Section.(*table.Report); err != nil || rep.Events != 4 || tr.Decisions != nil || rep.Detail.Rows.([]table.RowDetail)[0].Decision != "" || len(tr.Columns) != 11 {
		t.Fatalf("%+v, %v", rep, err)
	}
}

// TestInspectPlainTable: a table that is not a sluice event table is
// summarised as rows and columns, saying why it is not one.
func TestInspectPlainTable(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int32}}, nil)
	rb := array.NewRecordBuilder(mem, s)
	rb.Field(0).(*array.Int32Builder).AppendValues([]int32{1, 2, 3}, nil)
	rec := rb.NewRecordBatch()
	rb.Release()
	for _, b := range [][]byte{arrowFile(t, mem, s, []arrow.RecordBatch{rec}), parquetFile(t, mem, s, []arrow.RecordBatch{rec})} {
		rep, err := inspectWith(bytes.NewReader(b), 5, mem)
		if err != nil {
			t.Fatal(err)
		}
		tr := rep.Section.(*table.Report)
		if rep.Events != 0 || tr.Rows != 3 || tr.EventTable || !strings.Contains(tr.NotEvents, schemas.MetaSchemaVersion) ||
			rep.Detail.Of != "rows" || len(rep.Detail.Rows.([]table.RowDetail)) != 3 {
			t.Fatalf("%+v %+v", rep, tr)
		}
		text := squeeze(writeText(t, rep))
		if !strings.Contains(text, "columns: 1: x int32") || !strings.Contains(text, "event table: no: no sluice.schema_version") {
			t.Fatalf("text:\n%s", text)
		}
	}
	rec.Release()
}

// TestInspectTableErrors: a cut table file fails at its end, a damaged
// footer at the footer, both as *schemas.DecodeError.
func TestInspectTableErrors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s, recs := eventTable(t, mem, true)
	ab, pb := arrowFile(t, mem, s, recs), parquetFile(t, mem, s, recs)
	release(recs)
	footerLen := int64(pb[len(pb)-8]) | int64(pb[len(pb)-7])<<8 // < 64 KiB
	for _, c := range []struct {
		name     string
		b        []byte
		sentinel error
		off      int64
	}{
		{"arrow cut", ab[:len(ab)-100], schemas.ErrTruncated, int64(len(ab) - 100)},
		{"parquet cut", pb[:len(pb)-100], schemas.ErrTruncated, int64(len(pb) - 100)},
		{"arrow magic only", []byte("ARROW1\x00\x00"), schemas.ErrTruncated, 8},
		{"parquet footer garbage", func() []byte {
			b := bytes.Clone(pb)
			for i := len(b) - 8 - int(footerLen); i < len(b)-8; i++ {
				b[i] = 0xFF
			}
			return b
		}(), schemas.ErrBadHeader, int64(len(pb)-8) - footerLen},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := inspectWith(bytes.NewReader(c.b), 1, mem)
			var de *schemas.DecodeError
			if !errors.As(err, &de) || !errors.Is(err, c.sentinel) || de.Offset != c.off {
				t.Fatalf("error %v, want %v at %d", err, c.sentinel, c.off)
			}
		})
	}
}
