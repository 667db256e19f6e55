package table

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluice-daq/sluice/schemas/format"
)

// ExportName is the name `sluice store export --format` takes: "arrow"
// or "parquet".
func (f tableFile) ExportName() string { return f.export }

// NewWriter returns a writer of an Arrow IPC file, or of an uncompressed
// Parquet file without dictionaries (payloads neither repeat nor
// compress) that stores the Arrow schema, its metadata included, so that
// readers get the event schema back. Each Write is one record batch of
// the IPC file; in the Parquet file it is one row group, or several of at
// most ParquetRowGroupBytes of binary values each (see parquetWriter).
func (f tableFile) NewWriter(w io.Writer, schema *arrow.Schema, mem memory.Allocator) (format.Writer, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	if f.name == arrowName {
		return ipc.NewFileWriter(w, ipc.WithSchema(schema), ipc.WithAllocator(mem))
	}
	props := parquet.NewWriterProperties(parquet.WithDictionaryDefault(false), parquet.WithAllocator(mem))
	// pqarrow closes a writer that is an io.Closer; w is the caller's.
	fw, err := pqarrow.NewFileWriter(schema, struct{ io.Writer }{w}, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return nil, err
	}
	return &parquetWriter{fw: fw}, nil
}

// Sizes of the Parquet files written, chosen for the default readers. A
// binary value cannot span pages, so a page holds at least one whole
// value: arrow-go refuses pages over 64 MiB
// (parquet.DefaultMaxCompressedPageSize, compressed or not), and a group's
// payload of an event that large would give a file nobody reads back with
// defaults. Row groups are the unit readers (DuckDB, pyarrow, arrow-go's
// pqarrow) decode at a time: bounded in bytes, one batch of large events
// does not become one row group of gigabytes.
const (
	// ParquetMaxValue is the largest binary value (one group's payload of
	// one event) a Parquet export takes: the readers' page limit less room
	// for the page's header and levels.
	ParquetMaxValue = int(parquet.DefaultMaxCompressedPageSize - 64<<10)
	// ParquetRowGroupBytes bounds the binary bytes of a row group; a
	// row group has at least one row.
	ParquetRowGroupBytes = 64 << 20
)

// ErrValueTooLarge is the error of a Parquet export of a binary value
// larger than ParquetMaxValue.
var ErrValueTooLarge = errors.New("value too large for a Parquet page")

// parquetWriter writes each record in row groups of at most
// ParquetRowGroupBytes of binary values and refuses a value no default
// reader could read back (ErrValueTooLarge), before writing any of its
// record.
type parquetWriter struct{ fw *pqarrow.FileWriter }

func (p *parquetWriter) Write(rec arrow.RecordBatch) error {
	var bins []binaryColumn
	for _, c := range rec.Columns() {
		if b, ok := c.(binaryColumn); ok {
			bins = append(bins, b)
		}
	}
	n := int(rec.NumRows())
	if len(bins) == 0 || n == 0 {
		return p.fw.Write(rec)
	}
	rowBytes := make([]int, n)
	for ci, b := range bins {
		for i := range n {
			l := b.ValueLen(i)
			if l > ParquetMaxValue {
				return fmt.Errorf("parquet: %s: %w: %s of %d bytes (at most %d: default readers refuse pages over %d); export these events with --format arrow",
					rowName(rec, i), ErrValueTooLarge, columnName(rec, bins, ci), l, ParquetMaxValue, parquet.DefaultMaxCompressedPageSize)
			}
			rowBytes[i] += l
		}
	}
	for start := 0; start < n; {
		end, sum := start+1, rowBytes[start]
		for end < n && sum+rowBytes[end] <= ParquetRowGroupBytes {
			sum += rowBytes[end]
			end++
		}
		if start == 0 && end == n {
			return p.fw.Write(rec)
		}
		part := rec.NewSlice(int64(start), int64(end))
		err := p.fw.Write(part)
		part.Release()
		if err != nil {
			return err
		}
		start = end
	}
	return nil
}

func (p *parquetWriter) Close() error { return p.fw.Close() }

// binaryColumn is a Binary or LargeBinary (or String) column.
type binaryColumn interface {
	arrow.Array
	ValueLen(i int) int
}

// rowName names row i by its run and event id when the record has them.
func rowName(rec arrow.RecordBatch, i int) string {
	var run, id string
	for k, f := range rec.Schema().Fields() {
		switch c := rec.Column(k).(type) {
		case *array.Uint64:
			if f.Name == "event_id" {
				id = strconv.FormatUint(c.Value(i), 10)
			}
		case *array.Uint32:
			if f.Name == "run" {
				run = strconv.FormatUint(uint64(c.Value(i)), 10)
			}
		}
	}
	switch {
	case id != "" && run != "":
		return "run " + run + " event " + id
	case id != "":
		return "event " + id
	}
	return "row " + strconv.Itoa(i)
}

// columnName is the name of the ci-th binary column of rec.
func columnName(rec arrow.RecordBatch, bins []binaryColumn, ci int) string {
	for k := range rec.Columns() {
		if arrow.Array(bins[ci]) == rec.Column(k) {
			return "column " + rec.Schema().Field(k).Name
		}
	}
	return "a column"
}
