package storage

import (
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluice-daq/sluice/schemas"
)

// Format is an export file format.
type Format string

const (
	FormatArrow   Format = "arrow"   // Arrow IPC file
	FormatParquet Format = "parquet" // Parquet, uncompressed, Arrow schema stored
	FormatRows    Format = "rows"    // one byte record per event from ExportOptions.Encode (e.g. LHCb MDF)
)

// RowEncoder turns one event (row i of ev, with its stored verdict v) into
// the bytes of one record of a foreign event format, e.g. an LHCb MDF
// record; FormatRows writes the records back to back.
type RowEncoder func(ev *schemas.EventBatch, i int, v schemas.Verdict) ([]byte, error)

// ExportOptions configure Export.
type ExportOptions struct {
	Selection
	Limit  int              // events at most; 0: all
	Mem    memory.Allocator // allocates batches; default: the store's recycling allocator
	Encode RowEncoder       // required for FormatRows
}

// batchWriter is what an export format does with each batch.
type batchWriter interface {
	write(b *Batch, n int) error
	close() error
}

// Export writes the selected events of stream to w in format and returns
// the number of events written; w is not closed. An empty stream yields a valid file with
// no rows only when the store has a schema.
func (s *Store) Export(stream Stream, format Format, w io.Writer, opts ExportOptions) (int, error) {
	c, err := s.NewCursor(stream, CursorOptions{Selection: opts.Selection, Mem: opts.Mem})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if c.Schema() == nil {
		return 0, fmt.Errorf("store %s: export: the store is empty (no schema yet)", s.opts.Dir)
	}
	var bw batchWriter
	schema := schemas.ExportSchema(c.Schema())
	if opts.Mem == nil {
		opts.Mem = memory.DefaultAllocator // for the file writers' own buffers
	}
	switch format {
	case FormatArrow:
		fw, err := ipc.NewFileWriter(w, ipc.WithSchema(schema), ipc.WithAllocator(opts.Mem))
		if err != nil {
			return 0, err
		}
		bw = &recordWriter{mem: opts.Mem, schema: schema, put: fw.Write, end: fw.Close}
	case FormatParquet:
		// Payloads do not repeat and do not compress: no dictionary, no codec.
		props := parquet.NewWriterProperties(parquet.WithDictionaryDefault(false), parquet.WithAllocator(opts.Mem))
		// pqarrow closes a writer that is an io.Closer; w is the caller's.
		fw, err := pqarrow.NewFileWriter(schema, struct{ io.Writer }{w}, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
		if err != nil {
			return 0, err
		}
		bw = &recordWriter{mem: opts.Mem, schema: schema, put: fw.Write, end: fw.Close}
	case FormatRows:
		if opts.Encode == nil {
			return 0, errors.New("export: the rows format needs a row encoder")
		}
		bw = &rowsWriter{w: w, enc: opts.Encode}
	default:
		return 0, fmt.Errorf("export: unknown format %q (want arrow, parquet or rows)", format)
	}
	total := 0
	for opts.Limit == 0 || total < opts.Limit {
		b, err := c.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			bw.close()
			return total, err
		}
		n := b.Events.Len()
		if opts.Limit > 0 {
			n = min(n, opts.Limit-total)
		}
		err = bw.write(b, n)
		b.Release()
		if err != nil {
			bw.close()
			return total, fmt.Errorf("export %s: %w", format, err)
		}
		total += n
	}
	if err := bw.close(); err != nil {
		return total, fmt.Errorf("export %s: %w", format, err)
	}
	return total, nil
}

// recordWriter appends the metadata columns to each batch and hands it
// to an Arrow IPC or Parquet file writer.
type recordWriter struct {
	mem    memory.Allocator
	schema *arrow.Schema
	put    func(arrow.RecordBatch) error
	end    func() error
}

func (rw *recordWriter) write(b *Batch, n int) error {
	dec := array.NewUint8Builder(rw.mem)
	lines := array.NewUint64Builder(rw.mem)
	stage := array.NewStringBuilder(rw.mem)
	reason := array.NewStringBuilder(rw.mem)
	for _, bl := range []array.Builder{dec, lines, stage, reason} {
		defer bl.Release()
		bl.Reserve(n)
	}
	for _, v := range b.Verdicts[:n] {
		dec.Append(uint8(v.Decision))
		lines.Append(v.Lines)
		stage.Append(v.Stage)
		reason.Append(v.Reason.Text)
	}
	rec := b.Rec
	if n < int(rec.NumRows()) {
		rec = rec.NewSlice(0, int64(n))
		defer rec.Release()
	}
	cols := append([]arrow.Array{}, rec.Columns()...)
	extra := []arrow.Array{dec.NewArray(), lines.NewArray(), stage.NewArray(), reason.NewArray()}
	defer func() {
		for _, a := range extra {
			a.Release()
		}
	}()
	out := array.NewRecordBatch(rw.schema, append(cols, extra...), int64(n))
	defer out.Release()
	return rw.put(out)
}

func (rw *recordWriter) close() error { return rw.end() }

// rowsWriter writes one encoded record per event.
type rowsWriter struct {
	w   io.Writer
	enc RowEncoder
}

func (rw *rowsWriter) write(b *Batch, n int) error {
	for i := 0; i < n; i++ {
		rec, err := rw.enc(b.Events, i, b.Verdicts[i])
		if err != nil {
			return fmt.Errorf("run %d event %d: %w", b.Events.Run(i), b.Events.EventID(i), err)
		}
		if _, err := rw.w.Write(rec); err != nil {
			return err
		}
	}
	return nil
}

func (rw *rowsWriter) close() error { return nil }
