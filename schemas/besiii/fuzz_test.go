package besiii

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/sluice-daq/sluice/internal/decodetest"
	"github.com/sluice-daq/sluice/schemas/format"
)

// firstEvent is the real file's start records and first event with its
// separator (the seed of the fuzz targets).
func firstEvent(t testing.TB) []byte {
	b := sample(t)
	n := 16 + 4*int(binary.LittleEndian.Uint32(b[headBytes+20:]))
	return b[:headBytes+n]
}

func FuzzDecodeEvent(f *testing.F) {
	b := firstEvent(f)
	f.Add(b[headBytes+16:])
	f.Fuzz(func(t *testing.T, b []byte) {
		e, n, err := DecodeEvent(b)
		decodetest.Check(t, err, len(b))
		if err != nil {
			return
		}
		if n > len(b) {
			t.Fatalf("consumed %d of %d", n, len(b))
		}
		if again := AppendFragment(nil, &e); !bytes.Equal(again, b[:n]) {
			t.Fatal("a valid event does not re-encode to its bytes")
		}
		frags, err := SplitEvent(nil, &e, nil, 1)
		if err == nil {
			if _, err := parseHeader(frags[len(frags)-1].Payload); err != nil {
				t.Fatalf("the header fragment of a valid event does not parse: %v", err)
			}
		}
	})
}

// FuzzInspect: any stream is inspected without a panic, its error a
// DecodeError inside the stream.
func FuzzInspect(f *testing.F) {
	b := firstEvent(f)
	f.Add(b)
	f.Add(b[headBytes:])
	f.Add(b[headBytes+16:]) // a bare eformat v3.0 stream
	f.Fuzz(func(t *testing.T, b []byte) {
		s, _, err := format.NewStream(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		_, err = Format.Inspect(s, 2)
		decodetest.Check(t, err, len(b))
	})
}
