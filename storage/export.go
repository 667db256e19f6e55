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
	return WriteExport(e, w, opts.Mem, func(start func(*arrow.Schema) error, each func(arrow.RecordBatch) error) (int, error) {
		return s.ExportBatches(stream, opts, start, each)
	})
}

// ExportBatches calls start with the export schema (schemas.ExportSchema
// of the store's event schema), then each with every record batch of the
// selected events and their verdicts, in key order, at most opts.Limit
// events in all; a batch is released when each returns (retain it to keep
// it). It returns the number of events given. Errors: the store's, an
// empty store (no schema yet), or start's or each's error as it is.
func (s *Store) ExportBatches(stream Stream, opts ExportOptions, start func(*arrow.Schema) error, each func(arrow.RecordBatch) error) (int, error) {
	c, err := s.NewCursor(stream, CursorOptions{Selection: opts.Selection, Mem: opts.Mem, Provenance: true})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if c.Schema() == nil {
		return 0, fmt.Errorf("store %s: export: the store is empty (no schema yet)", s.opts.Dir)
	}
	schema := schemas.ExportSchema(c.Schema())
	if err := start(schema); err != nil {
		return 0, err
	}
	mem := opts.Mem
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	total := 0
	for opts.Limit == 0 || total < opts.Limit {
		b, err := c.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return total, err
		}
		n := b.Events.Len()
		if opts.Limit > 0 {
			n = min(n, opts.Limit-total)
		}
		err = exportBatch(mem, schema, b, n, each)
		b.Release()
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// WriteExport writes what batches gives (a Store's ExportBatches, or the
// same read from a node's Flight endpoint) through e's writer to w and
// returns the events written. Errors: batches', and e's writer's wrapped
// with its export name.
func WriteExport(e format.Exporter, w io.Writer, mem memory.Allocator, batches func(start func(*arrow.Schema) error, each func(arrow.RecordBatch) error) (int, error)) (int, error) {
	if mem == nil {
		mem = memory.DefaultAllocator // for the file writers' own buffers
	}
	var fw format.Writer
	var werr error // the writer's, to wrap apart from the store's
	n, err := batches(func(schema *arrow.Schema) error {
		fw, werr = e.NewWriter(w, schema, mem)
		return werr
	}, func(rec arrow.RecordBatch) error {
		werr = fw.Write(rec)
		return werr
	})
	if fw != nil {
		if cerr := fw.Close(); err == nil && cerr != nil {
			err, werr = cerr, cerr
		}
	}
	if err != nil && werr != nil && errors.Is(err, werr) {
		return n, fmt.Errorf("export %s: %w", e.ExportName(), err)
	}
	return n, err
}

// exportBatch gives each the first n rows of b, with their verdicts, as
// one record batch of the export schema.
func exportBatch(mem memory.Allocator, schema *arrow.Schema, b *Batch, n int, each func(arrow.RecordBatch) error) error {
	rec := b.Rec
	if n < int(rec.NumRows()) {
		rec = rec.NewSlice(0, int64(n))
		defer rec.Release()
	}
	var prov []schemas.Provenance
	if b.Provenance != nil {
		prov = b.Provenance[:n]
	}
	out := schemas.NewExportBatch(mem, schema, rec, b.Verdicts[:n], prov)
	defer out.Release()
	return each(out)
}
