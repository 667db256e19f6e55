package storage

import (
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
)

// ExportOptions configure Export.
type ExportOptions struct {
	Selection
	Limit int              // events at most; 0: all
	Mem   memory.Allocator // allocates batches; default: the store's recycling allocator
}

// Export writes the selected events of stream to w as e writes them
// (format.ExportOf; schemas/formats lists every exporter) and returns the
// number of events written; w is not closed. e's writer is given record
// batches of schemas.ExportSchema: the stored events with their verdicts.
// An empty stream yields a valid file with no rows only when the store
// has a schema. Errors: the store's, and e's writer's wrapped with its
// export name (e.g. a stored event that does not join into its format).
func (s *Store) Export(stream Stream, e format.Exporter, w io.Writer, opts ExportOptions) (int, error) {
	c, err := s.NewCursor(stream, CursorOptions{Selection: opts.Selection, Mem: opts.Mem})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if c.Schema() == nil {
		return 0, fmt.Errorf("store %s: export: the store is empty (no schema yet)", s.opts.Dir)
	}
	schema := schemas.ExportSchema(c.Schema())
	if opts.Mem == nil {
		opts.Mem = memory.DefaultAllocator // for the file writers' own buffers
	}
	fw, err := e.NewWriter(w, schema, opts.Mem)
	if err != nil {
		return 0, fmt.Errorf("export %s: %w", e.ExportName(), err)
	}
	total := 0
	for opts.Limit == 0 || total < opts.Limit {
		b, err := c.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fw.Close()
			return total, err
		}
		n := b.Events.Len()
		if opts.Limit > 0 {
			n = min(n, opts.Limit-total)
		}
		err = writeBatch(fw, opts.Mem, schema, b, n)
		b.Release()
		if err != nil {
			fw.Close()
			return total, fmt.Errorf("export %s: %w", e.ExportName(), err)
		}
		total += n
	}
	if err := fw.Close(); err != nil {
		return total, fmt.Errorf("export %s: %w", e.ExportName(), err)
	}
	return total, nil
}

// writeBatch writes the first n rows of b, with their verdicts, as one
// record batch of the export schema.
func writeBatch(fw format.Writer, mem memory.Allocator, schema *arrow.Schema, b *Batch, n int) error {
	rec := b.Rec
	if n < int(rec.NumRows()) {
		rec = rec.NewSlice(0, int64(n))
		defer rec.Release()
	}
	out := schemas.NewExportBatch(mem, schema, rec, b.Verdicts[:n])
	defer out.Release()
	return fw.Write(out)
}
