package atlas

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/sluice-daq/sluice/schemas"
)

// buildBatch builds a one-row event batch as the builder would, with one
// group "rob" holding payloads[k] for sources[k] (nil: source missing).
func buildBatch(t *testing.T, mem memory.Allocator, event uint64, sources []uint32, payloads [][]byte) arrow.RecordBatch {
	t.Helper()
	schema, err := schemas.EventSchema(schemas.ModeEvent, []schemas.SourceGroup{{Name: "rob", Sources: sources}})
	if err != nil {
		t.Fatal(err)
	}
	rb := array.NewRecordBuilder(mem, schema)
	defer rb.Release()
	rb.Field(0).(*array.Uint64Builder).Append(event)
	rb.Field(1).(*array.Uint32Builder).Append(431000)
	rb.Field(2).(*array.Uint64Builder).Append(0)
	rb.Field(3).(*array.Uint32Builder).Append(0)
	rb.Field(4).(*array.Uint32Builder).Append(uint32(len(sources)))
	rb.Field(5).(*array.ListBuilder).Append(true)
	rb.Field(6).(*array.ListBuilder).Append(true)
	sizes := rb.Field(8).(*array.ListBuilder)
	sizes.Append(true)
	var all []byte
	for _, p := range payloads {
		all = append(all, p...)
		sizes.ValueBuilder().(*array.Uint32Builder).Append(uint32(len(p)))
	}
	rb.Field(7).(*array.BinaryBuilder).Append(all)
	return rb.NewRecordBatch()
}

func TestJoinFullEventBatch(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	in := testEvent(ChecksumCRC16CCITT)
	in.ROBs = in.ROBs[:2]
	sources := []uint32{in.ROBs[0].SourceID, in.ROBs[1].SourceID, 0x999999}
	var payloads [][]byte
	for i := range in.ROBs {
		b, _ := AppendROB(nil, &in.ROBs[i], binary.LittleEndian)
		payloads = append(payloads, b)
	}
	rec := buildBatch(t, mem, uint64(in.GlobalID), sources, append(payloads, nil))
	defer rec.Release()
	eb, err := schemas.NewEventBatch(rec)
	if err != nil {
		t.Fatal(err)
	}
	hdr := in
	hdr.GlobalID, hdr.RunNumber = 0, 0 // taken from the batch
	got, err := JoinFullEventBatch(nil, eb, 0, &hdr)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := AppendFullEvent(nil, &in, binary.LittleEndian)
	if !bytes.Equal(got, want) {
		t.Fatal("joined event differs from the one its ROBs came from")
	}
	// A ROB under another source id is refused.
	bad := buildBatch(t, mem, 1, []uint32{5, 6}, payloads)
	defer bad.Release()
	eb, _ = schemas.NewEventBatch(bad)
	if _, err := JoinFullEventBatch(nil, eb, 0, &hdr); err == nil || !strings.Contains(err.Error(), "source 0x00000005 holds ROB 0x00110000") {
		t.Fatalf("ROB under the wrong source: %v", err)
	}
	// An event id over 32 bits does not fit global_id.
	wide := buildBatch(t, mem, 1<<32, sources[:1], payloads[:1])
	defer wide.Release()
	eb, _ = schemas.NewEventBatch(wide)
	if _, err := JoinFullEventBatch(nil, eb, 0, &hdr); err == nil {
		t.Fatal("64-bit event id accepted")
	}
}
