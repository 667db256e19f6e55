package table

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
)

// hugeEvents is a batch of the event schema (groups a and b, one source
// each) whose events have the given payload sizes per group; payload bytes
// are a pattern of the event id.
func hugeEvents(t *testing.T, sizes [][2]int) arrow.RecordBatch {
	t.Helper()
	s, err := schemas.EventSchema(schemas.ModeEvent, []schemas.SourceGroup{{Name: "a", Sources: []uint32{1}}, {Name: "b", Sources: []uint32{2}}})
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	for i, sz := range sizes {
		b.Field(0).(*array.Uint64Builder).Append(uint64(100 + i))
		b.Field(1).(*array.Uint32Builder).Append(7)
		b.Field(2).(*array.Uint64Builder).Append(uint64(i))
		b.Field(3).(*array.Uint32Builder).Append(0)
		b.Field(4).(*array.Uint32Builder).Append(2)
		b.Field(5).(*array.ListBuilder).Append(true)
		b.Field(6).(*array.ListBuilder).Append(true)
		for g := range 2 {
			p := bytes.Repeat([]byte{byte(i), byte(g), 0xA5, 0x5A}, sz[g]/4)
			b.Field(7 + 2*g).(*array.BinaryBuilder).Append(p)
			l := b.Field(8 + 2*g).(*array.ListBuilder)
			l.Append(true)
			l.ValueBuilder().(*array.Uint32Builder).Append(uint32(len(p)))
		}
	}
	return b.NewRecordBatch()
}

// TestParquetHugeEvents: a Parquet export of events of 64 MiB and more
// reads back with arrow-go's default reader, `sluice inspect`'s and,
// where installed, DuckDB; each large event is a row group of its own.
// A single group's payload of 64 MiB cannot be in any page the default
// readers take, so it is refused before anything of its batch is written,
// naming the event (it used to give a file nothing read back: "compressed
// page size 67108933 exceeds configured limit 67108864").
func TestParquetHugeEvents(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("writes 100 MiB of events: minutes under the race detector; `make memory` runs it without")
	}
	rec := hugeEvents(t, [][2]int{{36 << 20, 30 << 20}, {1000, 2000}, {30 << 20, 8}, {3, 5}})
	defer rec.Release()
	path := filepath.Join(t.TempDir(), "huge.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ParquetFormat.(format.Exporter).NewWriter(f, rec.Schema(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()

	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	// The 66 MiB event alone; then the other three together.
	if n := pf.NumRowGroups(); n != 2 {
		var rows []int64
		for i := range n {
			rows = append(rows, pf.RowGroup(i).NumRows())
		}
		t.Errorf("%d row groups (rows %v), want 2: the 66 MiB event alone, the others together within %d bytes", n, rows, ParquetRowGroupBytes)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatalf("arrow-go's default reader: %v", err)
	}
	defer tbl.Release()
	for g := range 2 {
		col := tbl.Column(7 + 2*g).Data()
		row := 0
		for _, c := range col.Chunks() {
			for i := range c.Len() {
				got, want := c.(*array.LargeBinary).Value(i), rec.Column(7+2*g).(*array.LargeBinary).Value(row)
				if !bytes.Equal(got, want) {
					t.Fatalf("group %d event %d: %d bytes read back, %d written, differing", g, row, len(got), len(want))
				}
				row++
			}
		}
		if row != 4 {
			t.Fatalf("%d events read back, 4 written", row)
		}
	}

	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	st, _, err := format.NewStream(in)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := ParquetFormat.Inspect(st, 10)
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	if tr := rep.Section.(*Report); tr.Rows != 4 || !tr.EventTable || tr.PayloadBytes.Max != 66<<20 {
		t.Errorf("inspect: %d rows (event table: %v), largest event %d bytes; want 4, an event table, %d", tr.Rows, tr.EventTable, tr.PayloadBytes.Max, 66<<20)
	}

	if duck, err := exec.LookPath("duckdb"); err == nil {
		out, err := exec.Command(duck, "-csv", "-noheader", "-c",
			"select count(*), sum(octet_length(payload_a)) from read_parquet('"+path+"')").CombinedOutput()
		if got, want := strings.TrimSpace(string(out)), "4,69207016"; err != nil || got != want {
			t.Errorf("duckdb: %q (%v), want %q", got, err, want)
		}
	} else {
		t.Log("duckdb not installed: not read with it")
	}

	big := hugeEvents(t, [][2]int{{10, 10}, {64 << 20, 4}})
	defer big.Release()
	var buf bytes.Buffer
	w, err = ParquetFormat.(format.Exporter).NewWriter(&buf, big.Schema(), nil)
	if err != nil {
		t.Fatal(err)
	}
	before := buf.Len()
	err = w.Write(big)
	if !errors.Is(err, ErrValueTooLarge) || !strings.Contains(err.Error(), "run 7 event 101") || !strings.Contains(err.Error(), "column payload_a of 67108864 bytes") {
		t.Fatalf("a 64 MiB payload of one group: %v", err)
	}
	if buf.Len() != before {
		t.Errorf("%d bytes of the refused batch written", buf.Len()-before)
	}
}
