package storage

import (
	"encoding/binary"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// rowBuilder turns decoded event values back into an event batch with the
// builder's schema (schemas.EventSchema of the stored groups).
type rowBuilder struct {
	rb      *array.RecordBuilder
	eventID *array.Uint64Builder
	run     *array.Uint32Builder
	ts      *array.Uint64Builder
	status  *array.Uint32Builder
	nfrag   *array.Uint32Builder
	missing *array.ListBuilder
	corrupt *array.ListBuilder
	payload []*array.BinaryBuilder
	sizes   []*array.ListBuilder
}

// newRowBuilder binds the builders of schema's columns in EventSchema's
// column order: seven metadata columns, then payload_G, sizes_G per group.
func newRowBuilder(mem memory.Allocator, schema *arrow.Schema, nGroups int) *rowBuilder {
	rb := array.NewRecordBuilder(mem, schema)
	b := &rowBuilder{
		rb:      rb,
		eventID: rb.Field(0).(*array.Uint64Builder),
		run:     rb.Field(1).(*array.Uint32Builder),
		ts:      rb.Field(2).(*array.Uint64Builder),
		status:  rb.Field(3).(*array.Uint32Builder),
		nfrag:   rb.Field(4).(*array.Uint32Builder),
		missing: rb.Field(5).(*array.ListBuilder),
		corrupt: rb.Field(6).(*array.ListBuilder),
	}
	for g := 0; g < nGroups; g++ {
		b.payload = append(b.payload, rb.Field(7+2*g).(*array.BinaryBuilder))
		b.sizes = append(b.sizes, rb.Field(8+2*g).(*array.ListBuilder))
	}
	return b
}

// reserve sizes the builders for n rows; the payload builders get the
// share of total bytes that group g has in the first row r, so that a
// batch of similar events is assembled without regrowing (and recopying)
// the payload buffers.
func (b *rowBuilder) reserve(n int, total int64, r *record, valueLen int) {
	b.rb.Reserve(n)
	for g, gv := range r.groups {
		share := float64(len(gv.payload)) / float64(max(valueLen, 1))
		b.payload[g].ReserveData(int(float64(total)*share*1.02) + 4096)
	}
}

// appendRecord adds one decoded event as a row.
func (b *rowBuilder) appendRecord(r *record) {
	b.eventID.Append(r.eventID)
	b.run.Append(r.run)
	b.ts.Append(r.timestamp)
	b.status.Append(r.status)
	b.nfrag.Append(r.nFrags)
	appendU32List(b.missing, r.missing)
	appendU32List(b.corrupt, r.corrupt)
	for g, gv := range r.groups {
		b.payload[g].Append(gv.payload)
		appendU32List(b.sizes[g], gv.sizes)
	}
}

// appendU32List appends one list of little-endian uint32 values.
func appendU32List(lb *array.ListBuilder, le []byte) {
	lb.Append(true)
	vb := lb.ValueBuilder().(*array.Uint32Builder)
	vb.Reserve(len(le) / 4)
	for i := 0; i+4 <= len(le); i += 4 {
		vb.UnsafeAppend(binary.LittleEndian.Uint32(le[i:]))
	}
}

func (b *rowBuilder) finish() arrow.RecordBatch { return b.rb.NewRecordBatch() }

func (b *rowBuilder) release() { b.rb.Release() }
