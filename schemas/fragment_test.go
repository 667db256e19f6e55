package schemas

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// wantDecodeErr asserts err is a *DecodeError wrapping sentinel at offset off.
func wantDecodeErr(t *testing.T, err error, sentinel error, off int64) {
	t.Helper()
	var de *DecodeError
	if !errors.Is(err, sentinel) || !errors.As(err, &de) {
		t.Fatalf("got %v, want %v", err, sentinel)
	}
	if de.Offset != off {
		t.Fatalf("offset %d, want %d (%v)", de.Offset, off, err)
	}
}

func TestFragmentRoundTrip(t *testing.T) {
	f := Fragment{SourceID: 1024, EventID: 1<<40 + 7, Flags: FlagSourceError, Payload: []byte("calorimeter")}
	b := AppendFragment([]byte("x"), &f, true)[1:]
	if len(b) != f.EncodedLen() {
		t.Fatalf("encoded %d bytes, EncodedLen says %d", len(b), f.EncodedLen())
	}
	g, n, err := DecodeFragment(append(b, 0xEE)) // a trailing byte is not consumed
	if err != nil {
		t.Fatal(err)
	}
	if n != len(b) || g.SourceID != f.SourceID || g.EventID != f.EventID || g.Flags != f.Flags || !bytes.Equal(g.Payload, f.Payload) {
		t.Fatalf("decoded %+v (%d bytes), want %+v (%d bytes)", g, n, f, len(b))
	}
	if !g.CRCValid() || g.CRC != Checksum(f.Payload) {
		t.Fatalf("CRC 0x%08x not the CRC-32C of the payload", g.CRC)
	}
	// CRC-32C check value of "123456789" (Castagnoli).
	if c := Checksum([]byte("123456789")); c != 0xE3069283 {
		t.Fatalf("Checksum check value 0x%08x, want 0xE3069283", c)
	}
}

func TestFragmentCorruptCRCKept(t *testing.T) {
	f := Fragment{SourceID: 3, EventID: 9, CRC: 0xDEADBEEF, Payload: []byte{1, 2, 3}}
	g, _, err := DecodeFragment(AppendFragment(nil, &f, false))
	if err != nil {
		t.Fatal(err)
	}
	if g.CRCValid() {
		t.Fatal("a wrong CRC was reported valid")
	}
}

func TestFragmentErrors(t *testing.T) {
	good := AppendFragment(nil, &Fragment{SourceID: 1, EventID: 2, Payload: make([]byte, 10)}, true)
	mod := func(fn func(b []byte)) []byte { b := bytes.Clone(good); fn(b); return b }
	cases := []struct {
		name     string
		b        []byte
		sentinel error
		off      int64
	}{
		{"short header", good[:31], ErrTruncated, 0},
		{"magic", mod(func(b []byte) { b[0] = 'X' }), ErrBadMagic, 0},
		{"version", mod(func(b []byte) { b[4] = 2 }), ErrBadVersion, 4},
		{"header size", mod(func(b []byte) { b[5] = 16 }), ErrBadHeader, 5},
		{"payload cut", good[:len(good)-1], ErrTruncated, 32},
		{"payload_len huge", mod(func(b []byte) { binary.LittleEndian.PutUint32(b[12:], 0xFFFFFFFF) }), ErrTruncated, 32},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := DecodeFragment(c.b)
			wantDecodeErr(t, err, c.sentinel, c.off)
		})
	}
}

func FuzzDecodeFragment(f *testing.F) {
	f.Add(AppendFragment(nil, &Fragment{SourceID: 1, EventID: 2, Payload: []byte("abc")}, true))
	f.Add(AppendFragment(nil, &Fragment{SourceID: 7, EventID: 1 << 60}, true))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, n, err := DecodeFragment(b)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %v is not a *DecodeError", err)
			}
			return
		}
		if n > len(b) || n < FragmentHeaderSize || len(g.Payload) > n {
			t.Fatalf("consumed %d of %d bytes with %d payload bytes", n, len(b), len(g.Payload))
		}
		// Re-encoding a decoded fragment gives back the header fields and payload.
		h, _, err := DecodeFragment(AppendFragment(nil, &g, false))
		if err != nil || h.EventID != g.EventID || h.SourceID != g.SourceID || h.CRC != g.CRC || !bytes.Equal(h.Payload, g.Payload) {
			t.Fatalf("re-encode mismatch: %v", err)
		}
	})
}
