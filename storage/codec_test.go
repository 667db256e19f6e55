package storage

import (
	"errors"
	"testing"

	"github.com/sluice-daq/sluice/schemas"
)

// encodeEvents encodes each of evs as the store writes it.
func encodeEvents(t testing.TB, evs []testEvent) [][]byte {
	rec := buildBatch(t, nil, evs)
	defer rec.Release()
	eb, _ := newView(t, rec)
	var out [][]byte
	for i := range evs {
		m := evs[i].meta
		v := appendValue(nil, eb, i, &m, eb.Status(i))
		if len(v) != encodedSize(eb, i, &m) {
			t.Fatalf("encodedSize %d, encoded %d bytes", encodedSize(eb, i, &m), len(v))
		}
		out = append(out, v)
	}
	return out
}

// TestDecodeTruncated cuts a valid value at every length: each must fail
// with a *schemas.DecodeError (never a panic) and an offset inside it.
func TestDecodeTruncated(t *testing.T) {
	e := genEvent(4, 9, 40)
	e.missing, e.corrupt = []uint32{1}, []uint32{2, 3}
	v := encodeEvents(t, []testEvent{e})[0]
	var r record
	if err := decodeValue(v, &r); err != nil {
		t.Fatal(err)
	}
	if r.run != 4 || r.eventID != 9 || len(r.groups) != 2 || string(r.stage) != "hlt1" || len(r.corrupt) != 8 {
		t.Fatalf("decoded %+v", r)
	}
	for n := 0; n < len(v); n++ {
		err := decodeValue(v[:n], &r)
		var de *schemas.DecodeError
		if !errors.As(err, &de) || de.Offset < 0 || de.Offset > int64(n) {
			t.Fatalf("value cut at %d: %v, want a DecodeError with an offset in range", n, err)
		}
	}
	long := append(append([]byte{}, v...), 0)
	if err := decodeValue(long, &r); !errors.Is(err, schemas.ErrInconsistent) {
		t.Fatalf("trailing byte: %v, want ErrInconsistent", err)
	}
	if err := r.checkKey(Key{Run: 4, EventID: 10}); !errors.Is(err, schemas.ErrInconsistent) {
		t.Fatalf("value under the wrong key: %v", err)
	}
}

// FuzzDecodeValue feeds the value decoder arbitrary bytes, seeded with
// real encodings: it must never panic, and what it accepts must be
// consistent with the input length.
func FuzzDecodeValue(f *testing.F) {
	evs := genEvents(1, 0, 3, 1, 64)
	evs[1].missing = []uint32{3}
	evs[2].meta.Reason.Text = "trigger timeout"
	for _, v := range encodeEvents(f, evs) {
		f.Add(v)
	}
	f.Add([]byte{ValueVersion})
	f.Add([]byte{ValueVersion + 1, 0, 0})
	f.Fuzz(func(t *testing.T, v []byte) {
		var r record
		err := decodeValue(v, &r)
		if err != nil {
			var de *schemas.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %v is not a *schemas.DecodeError", err)
			}
			return
		}
		n := valueHeaderSize + len(r.stage) + len(r.reason) + len(r.missing) + len(r.corrupt)
		for _, g := range r.groups {
			n += 12 + len(g.sizes) + len(g.payload)
		}
		if n != len(v) {
			t.Fatalf("decoded parts cover %d bytes of %d", n, len(v))
		}
	})
}
