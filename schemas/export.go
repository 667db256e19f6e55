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
	// ColProvenance: list<struct> (ProvenanceStep), one element per
	// stage that saw the event in each trigger pass, passes in order; an
	// empty list when the store kept no provenance for the event.
	ColProvenance = "provenance"
	// ColBuilt: struct (BuiltColumn), how the event was built beyond its
	// own columns: the sources that sent duplicates and those that came
	// late, and in a farm the builder unit and the assignment.
	ColBuilt = "built"
)

// BuiltColumn is the struct of the built column (schemas.Built):
// duplicated and late source ids (ascending), the builder unit's node
// name and incarnation ("" and 0 outside a farm) and the assignment id
// (0: none).
var BuiltColumn = arrow.StructOf(
	arrow.Field{Name: "duplicated", Type: arrow.ListOf(arrow.PrimitiveTypes.Uint32)},
	arrow.Field{Name: "late", Type: arrow.ListOf(arrow.PrimitiveTypes.Uint32)},
	arrow.Field{Name: "bu", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "incarnation", Type: arrow.PrimitiveTypes.Uint64},
	arrow.Field{Name: "assignment", Type: arrow.PrimitiveTypes.Uint64},
)

// ProvenanceStep is the struct of the provenance column's elements: the
// pass (0 online, 1.. replays) with its kind and when it was stored (Unix
// ns), the stage and its plugin (name, version, sha256 of the executable),
// the decision, the lines fired, the lines the prescales kept, and the
// reason.
var ProvenanceStep = arrow.StructOf(
	arrow.Field{Name: "pass", Type: arrow.PrimitiveTypes.Uint8},
	arrow.Field{Name: "replay", Type: arrow.FixedWidthTypes.Boolean},
	arrow.Field{Name: "at_ns", Type: arrow.PrimitiveTypes.Uint64},
	arrow.Field{Name: "stage", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "plugin", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "version", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "sha256", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "decision", Type: arrow.PrimitiveTypes.Uint8},
	arrow.Field{Name: "lines_fired", Type: arrow.PrimitiveTypes.Uint64},
	arrow.Field{Name: "lines_kept", Type: arrow.PrimitiveTypes.Uint64},
	arrow.Field{Name: "reason", Type: arrow.BinaryTypes.String},
)

// ExportSchema is the schema of the record batches an export writes
// (`sluice store export`; the whole file for Arrow IPC and Parquet): the
// event schema event, its metadata included, followed by the decision,
// trigger_lines, stage, reason, provenance and built columns.
func ExportSchema(event *arrow.Schema) *arrow.Schema {
	fields := append(event.Fields(),
		arrow.Field{Name: ColDecision, Type: arrow.PrimitiveTypes.Uint8},
		arrow.Field{Name: ColLines, Type: arrow.PrimitiveTypes.Uint64},
		arrow.Field{Name: ColStage, Type: arrow.BinaryTypes.String},
		arrow.Field{Name: ColReason, Type: arrow.BinaryTypes.String},
		arrow.Field{Name: ColProvenance, Type: arrow.ListOf(ProvenanceStep)},
		arrow.Field{Name: ColBuilt, Type: BuiltColumn},
	)
	md := event.Metadata()
	return arrow.NewSchema(fields, &md)
}

// NewExportBatch returns the rows of rec (the event schema) with the
// export columns of verdicts and prov appended (verdicts[i] and prov[i]
// are row i's; prov nil: no provenance), as a record batch of schema,
// ExportSchema(rec's schema). mem allocates the new columns; the event
// columns are shared with rec. The caller releases the batch. It panics
// when verdicts, prov and rec differ in length, a caller's bug.
func NewExportBatch(mem memory.Allocator, schema *arrow.Schema, rec arrow.RecordBatch, verdicts []Verdict, prov []Provenance) arrow.RecordBatch {
	n := len(verdicts)
	if int64(n) != rec.NumRows() || (prov != nil && len(prov) != n) {
		panic(fmt.Sprintf("export batch: %d verdicts and %d provenances for %d rows", n, len(prov), rec.NumRows()))
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
	pl := array.NewListBuilder(mem, ProvenanceStep)
	defer pl.Release()
	appendProvenance(pl, prov, n)
	bb := array.NewStructBuilder(mem, BuiltColumn)
	defer bb.Release()
	appendBuiltColumn(bb, prov, n)
	extra := []arrow.Array{dec.NewArray(), lines.NewArray(), stage.NewArray(), reason.NewArray(), pl.NewArray(), bb.NewArray()}
	defer func() {
		for _, a := range extra {
			a.Release()
		}
	}()
	return array.NewRecordBatch(schema, append(append([]arrow.Array{}, rec.Columns()...), extra...), int64(n))
}

// appendBuiltColumn appends n rows of the built column (empty when prov
// is nil).
func appendBuiltColumn(bb *array.StructBuilder, prov []Provenance, n int) {
	dup := bb.FieldBuilder(0).(*array.ListBuilder)
	late := bb.FieldBuilder(1).(*array.ListBuilder)
	bu := bb.FieldBuilder(2).(*array.StringBuilder)
	inc := bb.FieldBuilder(3).(*array.Uint64Builder)
	asg := bb.FieldBuilder(4).(*array.Uint64Builder)
	ids := func(lb *array.ListBuilder, v []uint32) {
		lb.Append(true)
		vb := lb.ValueBuilder().(*array.Uint32Builder)
		for _, id := range v {
			vb.Append(id)
		}
	}
	for i := range n {
		var b Built
		if prov != nil {
			b = prov[i].Built
		}
		bb.Append(true)
		ids(dup, b.Duplicated)
		ids(late, b.Late)
		bu.Append(b.BU)
		inc.Append(b.Incarnation)
		asg.Append(b.Assignment)
	}
}

// appendProvenance appends n rows of the provenance column (empty lists
// when prov is nil).
func appendProvenance(pl *array.ListBuilder, prov []Provenance, n int) {
	sb := pl.ValueBuilder().(*array.StructBuilder)
	pass := sb.FieldBuilder(0).(*array.Uint8Builder)
	replay := sb.FieldBuilder(1).(*array.BooleanBuilder)
	at := sb.FieldBuilder(2).(*array.Uint64Builder)
	stage := sb.FieldBuilder(3).(*array.StringBuilder)
	plugin := sb.FieldBuilder(4).(*array.StringBuilder)
	version := sb.FieldBuilder(5).(*array.StringBuilder)
	digest := sb.FieldBuilder(6).(*array.StringBuilder)
	dec := sb.FieldBuilder(7).(*array.Uint8Builder)
	fired := sb.FieldBuilder(8).(*array.Uint64Builder)
	kept := sb.FieldBuilder(9).(*array.Uint64Builder)
	reason := sb.FieldBuilder(10).(*array.StringBuilder)
	for i := range n {
		pl.Append(true)
		if prov == nil {
			continue
		}
		for pi, p := range prov[i].Passes {
			for _, st := range p.Steps {
				sb.Append(true)
				pass.Append(uint8(min(pi, 255)))
				replay.Append(p.Replay)
				at.Append(p.At)
				var id PluginID
				if st.Plugin != nil {
					id = *st.Plugin
				}
				stage.Append(id.Stage)
				plugin.Append(id.Name)
				version.Append(id.Version)
				digest.Append(id.Digest)
				dec.Append(uint8(st.Decision))
				fired.Append(st.Fired)
				kept.Append(st.Lines)
				reason.Append(st.Reason)
			}
		}
	}
}
