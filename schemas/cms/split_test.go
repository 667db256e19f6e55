package cms

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/sluice-daq/sluice/schemas"
)

func TestSplitJoinFRD(t *testing.T) {
	in := FRDEvent{Version: 4, Run: 362000, Lumi: 5, Event: 1 << 40, Data: fedBlock(t, 10, 700, 3)}
	frags, err := SplitFRD(nil, &in)
	if err != nil {
		t.Fatal(err)
	}
	if len(frags) != 3 {
		t.Fatalf("%d fragments, want 3", len(frags))
	}
	for i, want := range []uint32{10, 700, 3} {
		f := frags[i]
		if f.SourceID != want || f.EventID != in.Event || f.Flags != 0 || !f.CRCValid() {
			t.Fatalf("fragment %d: source %d event %d flags %b crc ok %v", i, f.SourceID, f.EventID, f.Flags, f.CRCValid())
		}
		fed, err := DecodeFED(f.Payload)
		if err != nil || uint32(fed.SourceID) != want || fed.LV1ID != 42 {
			t.Fatalf("fragment %d payload is not FED %d: %v", i, want, err)
		}
	}
	orig, _ := AppendFRD(nil, &in)
	hdr := in
	hdr.Data = nil
	out, err := JoinFRD(nil, &hdr, func(yield func([]byte) bool) {
		for _, f := range frags {
			if !yield(f.Payload) {
				return
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, orig) {
		t.Fatal("joined FRD event differs from the original")
	}
}

func TestSplitFRDFlagsAndErrors(t *testing.T) {
	data := fedBlock(t, 10, 700, 3)
	data[24+9] ^= 1 // corrupt FED 700's payload
	frags, err := SplitFRD(nil, &FRDEvent{Version: 5, Event: 1, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	if frags[1].Flags != schemas.FlagSourceError || frags[0].Flags != 0 || frags[2].Flags != 0 {
		t.Fatalf("flags %b %b %b, want only FED 700 flagged", frags[0].Flags, frags[1].Flags, frags[2].Flags)
	}
	// A FED whose trailer carries the F (SLINK error) bit is flagged too.
	slink := mustFED(t, &FED{SourceID: 5, SlinkError: true})
	frags, _ = SplitFRD(nil, &FRDEvent{Version: 5, Data: slink})
	if frags[0].Flags != schemas.FlagSourceError {
		t.Fatal("SLINK error not flagged")
	}
	// The same FED twice in one event.
	dup := fedBlock(t, 10, 700, 10)
	prev := []schemas.Fragment{{SourceID: 1}}
	got, err := SplitFRD(prev, &FRDEvent{Version: 5, Event: 7, Data: dup})
	wantDecodeErr(t, err, schemas.ErrInconsistent, 1)
	if len(got) != 1 {
		t.Fatalf("failed split left %d fragments in dst, want the 1 already there", len(got))
	}
	// A broken walk.
	_, err = SplitFRD(nil, &FRDEvent{Version: 5, Data: data[:len(data)-8]})
	wantDecodeErr(t, err, schemas.ErrBadMagic, int64(len(data)-9))
	// Joining a corrupt FED fails with its offset inside the fragment.
	_, err = JoinFRD(nil, &FRDEvent{Version: 5}, slices.Values([][]byte{data[24:56]}))
	wantDecodeErr(t, err, schemas.ErrCRCMismatch, 26)
}

type batchRow struct {
	event   uint64
	present []uint32
}

// buildBatch builds an event batch as the builder would: one group "fed"
// of the given sources, each row holding the FEDs of its present sources
// (empty payloads for the others).
func buildBatch(t *testing.T, mem memory.Allocator, sources []uint32, feds map[uint32][]byte, rows []batchRow) arrow.RecordBatch {
	t.Helper()
	schema, err := schemas.EventSchema(schemas.ModeEvent, []schemas.SourceGroup{{Name: "fed", Sources: sources}})
	if err != nil {
		t.Fatal(err)
	}
	rb := array.NewRecordBuilder(mem, schema)
	defer rb.Release()
	for _, r := range rows {
		rb.Field(0).(*array.Uint64Builder).Append(r.event)
		rb.Field(1).(*array.Uint32Builder).Append(362000)
		rb.Field(2).(*array.Uint64Builder).Append(0)
		rb.Field(3).(*array.Uint32Builder).Append(0)
		rb.Field(4).(*array.Uint32Builder).Append(uint32(len(r.present)))
		for _, k := range []int{5, 6} {
			rb.Field(k).(*array.ListBuilder).Append(true)
		}
		var payload []byte
		sizes := rb.Field(8).(*array.ListBuilder)
		sizes.Append(true)
		for _, id := range sources {
			p := []byte(nil)
			if slices.Contains(r.present, id) {
				p = feds[id]
			}
			payload = append(payload, p...)
			sizes.ValueBuilder().(*array.Uint32Builder).Append(uint32(len(p)))
		}
		rb.Field(7).(*array.BinaryBuilder).Append(payload)
	}
	return rb.NewRecordBatch()
}

// TestJoinFRDBatch joins the rows of a built event batch (one source
// missing in the second row) back to FRD events.
func TestJoinFRDBatch(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	sources := []uint32{3, 10, 700}
	feds := map[uint32][]byte{}
	for i, id := range sources {
		feds[id] = mustFED(t, &FED{SourceID: uint16(id), LV1ID: 9, Payload: payloadWords(uint16(id), i)})
	}
	rows := []batchRow{{9, sources}, {10, []uint32{3, 700}}}
	rec := buildBatch(t, mem, sources, feds, rows)
	defer rec.Release()
	eb, err := schemas.NewEventBatch(rec)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		b, err := JoinFRDBatch(nil, eb, i, 6, 77)
		if err != nil {
			t.Fatal(err)
		}
		e, _, err := DecodeFRD(b)
		if err != nil {
			t.Fatal(err)
		}
		if e.Version != 6 || e.Run != 362000 || e.Lumi != 77 || e.Event != r.event {
			t.Fatalf("row %d: header %+v", i, e)
		}
		var want []byte
		for _, id := range r.present {
			want = append(want, feds[id]...)
		}
		if !bytes.Equal(e.Data, want) {
			t.Fatalf("row %d: FED data differs", i)
		}
	}
	// A payload holding another FED than its source is refused.
	feds[10] = mustFED(t, &FED{SourceID: 11})
	bad := buildBatch(t, mem, sources, feds, rows[:1])
	defer bad.Release()
	eb, err = schemas.NewEventBatch(bad)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := JoinFRDBatch(nil, eb, 0, 6, 77); err == nil || !strings.Contains(err.Error(), "source 10 holds FED 11") {
		t.Fatalf("FED 11 under source 10: err %v, want a source mismatch", err)
	}
}
