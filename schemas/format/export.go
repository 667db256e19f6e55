package format

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
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

// ErrForeignEvents: the events being written in a format were not built
// from that format's data: they lack the fragment its splitter adds to
// every event (e.g. LHCb events exported as eformat).
var ErrForeignEvents = errors.New("events of another format")

// ForeignEvents is the error a Joiner of f returns for row i of eb when
// the row cannot have been split from f's data (why says how it shows,
// e.g. "has no fragment of source 0xffffffff, which every event split from
// atlas-full-event data carries"): it names f, the run and event, and the
// source groups the events do have, e.g. `these events are not
// atlas-full-event events: run 7 event 3 has no fragment of source ...
// (their source groups: odin, velo); export them in the format they were
// read from`. It wraps ErrForeignEvents.
func ForeignEvents(f Format, eb *schemas.EventBatch, i int, why string, args ...any) error {
	names := make([]string, 0, len(eb.Groups))
	for _, g := range eb.Groups {
		names = append(names, g.Name)
	}
	if len(names) > 8 {
		names = append(names[:8], "...")
	}
	return fmt.Errorf("these events are not %s events: run %d event %d %s (their source groups: %s); export them in the format they were read from: %w",
		f.Name(), eb.Run(i), eb.EventID(i), fmt.Sprintf(why, args...), strings.Join(names, ", "), ErrForeignEvents)
}

// NoHeaderFragment is the ForeignEvents of a Joiner of f whose splitter
// adds a header fragment of source header to every event.
func NoHeaderFragment(f Format, header uint32, eb *schemas.EventBatch, i int) error {
	return ForeignEvents(f, eb, i, "has no fragment of source %#x, which every event split from %s data carries", header, f.Name())
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
// and writes the records, through VerdictJoiner.JoinVerdict with each
// row's decision and lines when the joiner has it and rec has the export
// schema's decision columns. A row that does not join stops the writing
// with an error naming its run and event id.
func (jw *joinWriter) Write(rec arrow.RecordBatch) error {
	eb, err := schemas.NewEventBatch(rec)
	if err != nil {
		return err
	}
	vj, _ := jw.j.(VerdictJoiner)
	var dec *array.Uint8
	var lines *array.Uint64
	if vj != nil {
		d, l := rec.Schema().FieldIndices(schemas.ColDecision), rec.Schema().FieldIndices(schemas.ColLines)
		if len(d) == 1 && len(l) == 1 {
			dec, _ = rec.Column(d[0]).(*array.Uint8)
			lines, _ = rec.Column(l[0]).(*array.Uint64)
		}
	}
	for i := range eb.Len() {
		if dec != nil && lines != nil {
			v := schemas.Verdict{Decision: schemas.Decision(dec.Value(i)), Lines: lines.Value(i)}
			jw.buf, err = vj.JoinVerdict(jw.buf[:0], eb, i, v)
		} else {
			jw.buf, err = jw.j.Join(jw.buf[:0], eb, i)
		}
		if err != nil {
			if errors.Is(err, ErrForeignEvents) {
				return err // names the run and event already
			}
			return fmt.Errorf("run %d event %d: %w", eb.Run(i), eb.EventID(i), err)
		}
		if _, err := jw.w.Write(jw.buf); err != nil {
			return err
		}
	}
	return nil
}

func (jw *joinWriter) Close() error { return nil }
