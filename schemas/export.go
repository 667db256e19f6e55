package schemas

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Columns an export adds after the event schema's: the trigger metadata
// stored with each event (see ExportSchema).
const (
	ColDecision = "decision"      // uint8: Decision
	ColLines    = "trigger_lines" // uint64: trigger line bit mask
	ColStage    = "stage"         // utf8: the deciding (or deferring) stage
	ColReason   = "reason"        // utf8: why
)

// ExportSchema is the schema of the record batches an export writes
// (`sluice store export`; the whole file for Arrow IPC and Parquet): the
// event schema event, its metadata included, followed by the decision,
// trigger_lines, stage and reason columns.
func ExportSchema(event *arrow.Schema) *arrow.Schema {
	fields := append(event.Fields(),
		arrow.Field{Name: ColDecision, Type: arrow.PrimitiveTypes.Uint8},
		arrow.Field{Name: ColLines, Type: arrow.PrimitiveTypes.Uint64},
		arrow.Field{Name: ColStage, Type: arrow.BinaryTypes.String},
		arrow.Field{Name: ColReason, Type: arrow.BinaryTypes.String},
	)
	md := event.Metadata()
	return arrow.NewSchema(fields, &md)
}

// NewExportBatch returns the rows of rec (the event schema) with the
// export columns of verdicts appended (verdicts[i] is row i's), as a
// record batch of schema, ExportSchema(rec's schema). mem allocates the
// new columns; the event columns are shared with rec. The caller releases
// the batch. It panics when verdicts and rec differ in length, a caller's
// bug.
func NewExportBatch(mem memory.Allocator, schema *arrow.Schema, rec arrow.RecordBatch, verdicts []Verdict) arrow.RecordBatch {
	n := len(verdicts)
	if int64(n) != rec.NumRows() {
		panic(fmt.Sprintf("export batch: %d verdicts for %d rows", n, rec.NumRows()))
	}
	dec := array.NewUint8Builder(mem)
	lines := array.NewUint64Builder(mem)
	stage := array.NewStringBuilder(mem)
	reason := array.NewStringBuilder(mem)
	for _, bl := range []array.Builder{dec, lines, stage, reason} {
		defer bl.Release()
		bl.Reserve(n)
	}
	for _, v := range verdicts {
		dec.Append(uint8(v.Decision))
		lines.Append(v.Lines)
		stage.Append(v.Stage)
		reason.Append(v.Reason.Text)
	}
	extra := []arrow.Array{dec.NewArray(), lines.NewArray(), stage.NewArray(), reason.NewArray()}
	defer func() {
		for _, a := range extra {
			a.Release()
		}
	}()
	return array.NewRecordBatch(schema, append(append([]arrow.Array{}, rec.Columns()...), extra...), int64(n))
}
