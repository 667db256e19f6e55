package cms

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/sluice-daq/sluice/internal/decodetest"
	"github.com/sluice-daq/sluice/schemas"
)

// payloadWords returns n 64-bit words of recognisable payload for FED id.
func payloadWords(id uint16, n int) []byte {
	b := make([]byte, 8*n)
	for i := range n {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(id)<<48|uint64(i))
	}
	return b
}

func mustFED(t testing.TB, f *FED) []byte {
	t.Helper()
	b, err := AppendFED(nil, f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFEDRoundTrip(t *testing.T) {
	in := FED{
		SourceID: 0xABC, EventType: 0x3, LV1ID: 0x123456, BXID: 0xDEF, FOV: 0x2, MoreHeaders: true,
		EvtStat: 0x5, TTS: 0x8, MoreTrailers: true, WrongFEDID: true, SlinkError: true, CRCModified: true,
		Payload: payloadWords(0xABC, 3),
	}
	b := mustFED(t, &in)
	if len(b) != 40 {
		t.Fatalf("encoded %d bytes, want 40", len(b))
	}
	// Header word bits, per the FED header table in doc.go.
	if h := binary.LittleEndian.Uint64(b); h != 0x5_3_123456_DEF_ABC_2_8 {
		t.Fatalf("header word 0x%016X", h)
	}
	tr := binary.LittleEndian.Uint64(b[32:])
	if tr>>32 != 0xA0000005 {
		t.Fatalf("trailer high word 0x%08X, want marker 0xA and Evt_lgth 5", tr>>32)
	}
	if tr&0xFFFF != 0xC58C {
		t.Fatalf("trailer low bits 0x%04X, want R|F|stat 5|TTS 8|T|C = 0xC58C", tr&0xFFFF)
	}
	out, err := DecodeFED(b)
	if err != nil {
		t.Fatal(err)
	}
	if out.CRC != FEDCRC(b) || !out.CRCValid() {
		t.Fatalf("stored CRC 0x%04X, computed 0x%04X", out.CRC, FEDCRC(b))
	}
	in.CRC = out.CRC
	out.raw = nil
	if !bytes.Equal(out.Payload, in.Payload) {
		t.Fatal("payload differs")
	}
	out.Payload, in.Payload = nil, nil
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("decoded %+v, want %+v", out, in)
	}
}

func TestAppendFEDRejects(t *testing.T) {
	for name, f := range map[string]FED{
		"odd payload": {Payload: make([]byte, 12)},
		"FED id":      {SourceID: 0x1000},
		"LV1 id":      {LV1ID: 1 << 24},
		"BX id":       {BXID: 0x1000},
	} {
		if _, err := AppendFED(nil, &f); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestDecodeFEDErrors(t *testing.T) {
	good := mustFED(t, &FED{SourceID: 100, Payload: payloadWords(100, 2)}) // 32 bytes
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := []struct {
		name     string
		b        []byte
		sentinel error
		off      int64
	}{
		{"truncated", good[:8], schemas.ErrTruncated, 0},
		{"not whole words", good[:20], schemas.ErrBadHeader, 0},
		{"bad BOE", mod(func(b []byte) []byte { b[7] = 0x40; return b }), schemas.ErrBadMagic, 7},
		{"bad EOE", mod(func(b []byte) []byte { b[31] = 0xB0; return b }), schemas.ErrBadMagic, 31},
		{"length mismatch", good[8:], schemas.ErrInconsistent, 20},
		{"CRC mismatch", mod(func(b []byte) []byte { b[9] ^= 1; return b }), schemas.ErrCRCMismatch, 26},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeFED(c.b)
			decodetest.Want(t, err, c.sentinel, c.off)
		})
	}
	// A CRC mismatch still returns the decoded FED so that it can be flagged.
	f, err := DecodeFED(cases[5].b)
	if !errors.Is(err, schemas.ErrCRCMismatch) || f.SourceID != 100 || f.CRCValid() {
		t.Fatalf("CRC mismatch: FED %+v, err %v", f, err)
	}
}

func fedBlock(t testing.TB, ids ...uint16) []byte {
	var b []byte
	for i, id := range ids {
		var err error
		b, err = AppendFED(b, &FED{SourceID: id, LV1ID: 42, Payload: payloadWords(id, i+1)})
		if err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func TestWalkFEDs(t *testing.T) {
	data := fedBlock(t, 10, 700, 3) // 24, 32, 40 bytes
	var ids []uint16
	var offs []int
	err := WalkFEDs(data, func(off int, f FED) bool {
		if !f.CRCValid() {
			t.Errorf("FED %d: bad CRC", f.SourceID)
		}
		ids, offs = append(ids, f.SourceID), append(offs, off)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint16{3, 700, 10}; !equal(ids, want) {
		t.Fatalf("walk visited %v, want %v (last first)", ids, want)
	}
	if want := []int{56, 24, 0}; !equal(offs, want) {
		t.Fatalf("offsets %v, want %v", offs, want)
	}
	// Stopping early.
	n := 0
	if err := WalkFEDs(data, func(int, FED) bool { n++; return false }); err != nil || n != 1 {
		t.Fatalf("early stop: %d calls, err %v", n, err)
	}
	if err := WalkFEDs(nil, func(int, FED) bool { t.Fatal("called on empty data"); return true }); err != nil {
		t.Fatal(err)
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestWalkFEDsErrors(t *testing.T) {
	data := fedBlock(t, 10, 700, 3) // FEDs at 0 (24 B), 24 (32 B), 56 (40 B); 96 bytes
	mod := func(f func(b []byte)) []byte { b := append([]byte(nil), data...); f(b); return b }
	setLen := func(b []byte, tr int, words uint32) { binary.LittleEndian.PutUint32(b[tr+4:], 0xA<<28|words) }
	cases := []struct {
		name     string
		b        []byte
		sentinel error
		off      int64
	}{
		{"not whole words", data[:95], schemas.ErrBadHeader, 0},
		{"bad EOE of last", mod(func(b []byte) { b[95] = 0x00 }), schemas.ErrBadMagic, 95},
		{"bad EOE of middle", mod(func(b []byte) { b[55] = 0x50 }), schemas.ErrBadMagic, 55},
		{"length beyond start", mod(func(b []byte) { setLen(b, 88, 13) }), schemas.ErrSizeOverflow, 92},
		{"length under 2 words", mod(func(b []byte) { setLen(b, 88, 1) }), schemas.ErrSizeOverflow, 92},
		{"bad BOE", mod(func(b []byte) { b[24+7] = 0x00 }), schemas.ErrBadMagic, 31},
		{"lone word before first", append(make([]byte, 8), data...)[:8+24], schemas.ErrTruncated, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			decodetest.Want(t, WalkFEDs(c.b, func(int, FED) bool { return true }), c.sentinel, c.off)
		})
	}
}
