package storage

import (
	"encoding/binary"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// rowBuilder turns decoded event values back into an event batch with the
// builder's schema (schemas.EventSchema of the stored groups). Metadata
// and size columns use Arrow builders; the payload columns, nearly all the
// bytes, are assembled directly: one copy from the value read into a buffer
// sized up front, no zeroing, offsets written alongside.
type rowBuilder struct {
	mem     memory.Allocator
	schema  *arrow.Schema
	eventID *array.Uint64Builder
	run     *array.Uint32Builder
	ts      *array.Uint64Builder
	status  *array.Uint32Builder
	nfrag   *array.Uint32Builder
	missing *array.ListBuilder
	corrupt *array.ListBuilder
	sizes   []*array.ListBuilder
	payload []payloadColumn
	n       int
}

// payloadColumn is one LargeBinary column being assembled.
type payloadColumn struct {
	data    *memory.Buffer // payloads back to back; nil until reserved
	used    int
	offsets []int64 // offsets[i] = start of row i; len = rows + 1
}

// newRowBuilder binds builders to schema's columns in EventSchema's order:
// seven metadata columns, then payload_G, sizes_G per group.
func newRowBuilder(mem memory.Allocator, schema *arrow.Schema, nGroups int) *rowBuilder {
	f := schema.Fields()
	b := &rowBuilder{
		mem:     mem,
		schema:  schema,
		eventID: array.NewUint64Builder(mem),
		run:     array.NewUint32Builder(mem),
		ts:      array.NewUint64Builder(mem),
		status:  array.NewUint32Builder(mem),
		nfrag:   array.NewUint32Builder(mem),
		missing: array.NewBuilder(mem, f[5].Type).(*array.ListBuilder),
		corrupt: array.NewBuilder(mem, f[6].Type).(*array.ListBuilder),
		payload: make([]payloadColumn, nGroups),
	}
	for g := 0; g < nGroups; g++ {
		b.sizes = append(b.sizes, array.NewBuilder(mem, f[8+2*g].Type).(*array.ListBuilder))
	}
	return b
}

func (b *rowBuilder) builders() []array.Builder {
	out := []array.Builder{b.eventID, b.run, b.ts, b.status, b.nfrag, b.missing, b.corrupt}
	for _, s := range b.sizes {
		out = append(out, s)
	}
	return out
}

// reserve sizes the columns for n rows; payload column g gets the share of
// total bytes that group g has in the first row r, so that a batch of
// similar events is assembled without regrowing (and recopying) it.
func (b *rowBuilder) reserve(n int, total int64, r *record, valueLen int) {
	for _, bl := range b.builders() {
		bl.Reserve(n)
	}
	for g, gv := range r.groups {
		share := float64(len(gv.payload)) / float64(max(valueLen, 1))
		pc := &b.payload[g]
		pc.data = memory.NewResizableBuffer(b.mem)
		pc.data.Reserve(int(float64(total)*share*1.02) + 4096)
		pc.used = 0
		pc.offsets = append(pc.offsets[:0], 0)
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
		pc := &b.payload[g]
		if need := pc.used + len(gv.payload); need > pc.data.Cap() {
			pc.data.Reserve(max(need, 2*pc.data.Cap()))
		}
		pc.used += copy(pc.data.Buf()[pc.used:], gv.payload)
		pc.offsets = append(pc.offsets, int64(pc.used))
		appendU32List(b.sizes[g], gv.sizes)
	}
	b.n++
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

// finish returns the batch of the rows appended since the last reserve.
func (b *rowBuilder) finish() arrow.RecordBatch {
	cols := []arrow.Array{b.eventID.NewArray(), b.run.NewArray(), b.ts.NewArray(), b.status.NewArray(),
		b.nfrag.NewArray(), b.missing.NewArray(), b.corrupt.NewArray()}
	for g := range b.payload {
		cols = append(cols, b.payload[g].finish(b.mem, b.n), b.sizes[g].NewArray())
	}
	rec := array.NewRecordBatch(b.schema, cols, int64(b.n))
	for _, c := range cols {
		c.Release()
	}
	b.n = 0
	return rec
}

func (pc *payloadColumn) finish(mem memory.Allocator, n int) arrow.Array {
	offs := memory.NewResizableBuffer(mem)
	offs.Resize(8 * (n + 1))
	copy(arrow.Int64Traits.CastFromBytes(offs.Bytes()), pc.offsets)
	pc.data.Resize(pc.used)
	d := array.NewData(arrow.BinaryTypes.LargeBinary, n, []*memory.Buffer{nil, offs, pc.data}, nil, 0, 0)
	arr := array.NewLargeBinaryData(d)
	d.Release()
	offs.Release()
	pc.data.Release()
	pc.data = nil
	return arr
}

// release frees everything held, including a partly built batch.
func (b *rowBuilder) release() {
	for _, bl := range b.builders() {
		bl.Release()
	}
	for g := range b.payload {
		if b.payload[g].data != nil {
			b.payload[g].data.Release()
			b.payload[g].data = nil
		}
	}
}
