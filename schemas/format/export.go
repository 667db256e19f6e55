package format

import (
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/schemas"
)

// ExportOf returns how built events are written in f: f itself when it is
// an Exporter, else, when it is a Joiner, an Exporter writing each event's
// joined record after the other; ok is false for a format that does
// neither.
func ExportOf(f Format) (e Exporter, ok bool) {
	if e, ok := f.(Exporter); ok {
		return e, true
	}
	if j, ok := f.(Joiner); ok {
		return joinExporter{j}, true
	}
	return nil, false
}

// joinExporter exports through a Joiner: the records back to back, the
// trigger decisions left out (the format has no place for them).
type joinExporter struct{ j Joiner }

func (e joinExporter) ExportName() string { return e.j.ExportName() }

func (e joinExporter) NewWriter(w io.Writer, _ *arrow.Schema, _ memory.Allocator) (Writer, error) {
	return &joinWriter{w: w, j: e.j.NewJoiner()}, nil
}

type joinWriter struct {
	w   io.Writer
	j   EventJoiner
	buf []byte
}

// Write joins every row of rec (the event columns of the export schema)
// and writes the records. A row that does not join stops the writing
// with an error naming its run and event id.
func (jw *joinWriter) Write(rec arrow.RecordBatch) error {
	eb, err := schemas.NewEventBatch(rec)
	if err != nil {
		return err
	}
	for i := range eb.Len() {
		if jw.buf, err = jw.j.Join(jw.buf[:0], eb, i); err != nil {
			return fmt.Errorf("run %d event %d: %w", eb.Run(i), eb.EventID(i), err)
		}
		if _, err := jw.w.Write(jw.buf); err != nil {
			return err
		}
	}
	return nil
}

func (jw *joinWriter) Close() error { return nil }
