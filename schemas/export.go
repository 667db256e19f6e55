package schemas

import "github.com/apache/arrow-go/v18/arrow"

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
