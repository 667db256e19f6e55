package vdif

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/schemas"
)

// eventRow is one event for makeBatch: its id and each source's payload
// (a source absent from the map sent nothing).
type eventRow struct {
	id       uint64
	payloads map[uint32][]byte
}

// makeBatch builds an event batch of one group the way the builder lays it
// out, so that the joiner can be tested on its own.
func makeBatch(t *testing.T, mem memory.Allocator, sources []uint32, rows []eventRow) arrow.RecordBatch {
	t.Helper()
	schema, err := schemas.EventSchema(schemas.ModeEvent, []schemas.SourceGroup{{Name: "vdif", Sources: sources}})
	if err != nil {
		t.Fatal(err)
	}
	rb := array.NewRecordBuilder(mem, schema)
	defer rb.Release()
	for _, r := range rows {
		rb.Field(0).(*array.Uint64Builder).Append(r.id)
		rb.Field(1).(*array.Uint32Builder).Append(1)
		rb.Field(2).(*array.Uint64Builder).Append(0)
		var missing []uint32
		var data []byte
		sizes := make([]uint32, len(sources))
		for k, s := range sources {
			p, ok := r.payloads[s]
			if !ok {
				missing = append(missing, s)
			}
			data = append(data, p...)
			sizes[k] = uint32(len(p))
		}
		status := uint32(0)
		if len(missing) > 0 {
			status = uint32(schemas.StatusIncomplete)
		}
		rb.Field(3).(*array.Uint32Builder).Append(status)
		rb.Field(4).(*array.Uint32Builder).Append(uint32(len(r.payloads)))
		appendList(rb.Field(5), missing)
		appendList(rb.Field(6), nil)
		appendList(rb.Field(8), sizes)
		rb.Field(7).(*array.BinaryBuilder).Append(data)
	}
	return rb.NewRecordBatch()
}

// appendList appends one list<uint32> value to a list column builder.
func appendList(b array.Builder, vals []uint32) {
	lb := b.(*array.ListBuilder)
	lb.Append(true)
	lb.ValueBuilder().(*array.Uint32Builder).AppendValues(vals, nil)
}

// rowsOf groups sample frames into events by event id, in stream order.
func rowsOf(fs []Frame) []eventRow {
	var rows []eventRow
	for _, f := range fs {
		frag := FrameFragment(&f)
		if len(rows) == 0 || rows[len(rows)-1].id != frag.EventID {
			rows = append(rows, eventRow{id: frag.EventID, payloads: map[uint32][]byte{}})
		}
		rows[len(rows)-1].payloads[frag.SourceID] = frag.Payload
	}
	return rows
}

func TestJoinerOrders(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := sample(t, "sample.vdif")
	fs := frames(t, b)
	order, err := ScanSources(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	sorted := slices.Sorted(slices.Values(order))
	rec := makeBatch(t, mem, sorted, rowsOf(fs))
	defer rec.Release()
	eb, err := schemas.NewEventBatch(rec)
	if err != nil {
		t.Fatal(err)
	}
	// In the recording's order: the original file, byte for byte.
	j := Joiner{Order: order}
	var out []byte
	for i := range eb.Len() {
		if out, err = j.Join(out, eb, i); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(out, b) || j.Frames != 16 || j.Missing != 0 {
		t.Fatalf("joined %d bytes, %d frames, %d missing; differs from the sample", len(out), j.Frames, j.Missing)
	}
	// In source order: threads 0..7 for each frame number.
	j = Joiner{}
	out = out[:0]
	for i := range eb.Len() {
		if out, err = j.Join(out, eb, i); err != nil {
			t.Fatal(err)
		}
	}
	got := frames(t, out)
	for k, f := range got {
		if f.Header.ThreadID != uint16(k%8) || f.Header.FrameNumber != uint32(k/8) {
			t.Fatalf("frame %d: thread %d number %d", k, f.Header.ThreadID, f.Header.FrameNumber)
		}
	}
}

func TestJoinerErrors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	fs := frames(t, sample(t, "sample.vdif"))
	src0, src1 := SourceID(&fs[4].Header), SourceID(&fs[0].Header) // threads 0, 1
	id0 := EventID(&fs[0].Header)
	rows := []eventRow{
		{id0, map[uint32][]byte{src0: fs[4].Bytes}},                                  // thread 1 missing
		{id0, map[uint32][]byte{src0: fs[0].Bytes}},                                  // thread 1's frame under thread 0
		{id0 + 1, map[uint32][]byte{src0: fs[4].Bytes}},                              // frame 0 under event frame 1
		{id0, map[uint32][]byte{src0: append(bytes.Clone(fs[4].Bytes), 0, 0, 0, 0)}}, // trailing bytes
		{id0, map[uint32][]byte{src0: fs[4].Bytes[:100]}},                            // cut frame
	}
	rec := makeBatch(t, mem, []uint32{src0, src1}, rows)
	defer rec.Release()
	eb, err := schemas.NewEventBatch(rec)
	if err != nil {
		t.Fatal(err)
	}
	var j Joiner
	out, err := j.Join(nil, eb, 0)
	if err != nil || !bytes.Equal(out, fs[4].Bytes) || j.Missing != 1 || j.Frames != 1 {
		t.Fatalf("missing thread: %v, %d missing", err, j.Missing)
	}
	for row, tc := range []struct {
		sentinel error
		off      int64
	}{{schemas.ErrInconsistent, 12}, {schemas.ErrInconsistent, 0}, {schemas.ErrInconsistent, 5032}, {schemas.ErrTruncated, 0}} {
		_, err := j.Join(nil, eb, row+1)
		wantDecodeError(t, err, "vdif", tc.sentinel, tc.off)
	}
	// A source of the event left out of Order would be dropped: refused.
	j = Joiner{Order: []uint32{src1}}
	if _, err := j.Join(nil, eb, 0); !errors.Is(err, schemas.ErrInconsistent) {
		t.Fatalf("order without thread 0: %v", err)
	}
	j = Joiner{Order: []uint32{src0, 12345}}
	if _, err := j.Join(nil, eb, 0); !errors.Is(err, schemas.ErrInconsistent) {
		t.Fatalf("unknown source in order: %v", err)
	}
}
