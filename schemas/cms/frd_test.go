package cms

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/adler32"
	"hash/crc32"
	"io"
	"reflect"
	"testing"

	"github.com/sluice-daq/sluice/internal/decodetest"
	"github.com/sluice-daq/sluice/schemas"
)

func testEvents(t testing.TB) []FRDEvent {
	data := fedBlock(t, 1, 50, 1023)
	return []FRDEvent{
		{Version: 3, Run: 362000, Lumi: 17, Event: 0xFFFFFFFF, Padding: 8, Data: data},
		{Version: 4, Run: 362000, Lumi: 17, Event: 0x1_2345_6789, Padding: 3, Data: data},
		{Version: 5, Run: 362001, Lumi: 2, Event: 99, Data: data},
		{Version: 6, Flags: FRDFlagGenData, Run: 362002, Lumi: 3, Event: 100, Data: data},
		{Version: 6, Run: 362002, Lumi: 3, Event: 101}, // an empty event
	}
}

func TestFRDRoundTrip(t *testing.T) {
	for _, in := range testEvents(t) {
		b, err := AppendFRD(nil, &in)
		if err != nil {
			t.Fatal(err)
		}
		hs := FRDHeaderSize(in.Version)
		if want := hs + len(in.Data) + int(in.Padding); len(b) != want || in.EncodedLen() != want {
			t.Fatalf("v%d: %d bytes (EncodedLen %d), want %d", in.Version, len(b), in.EncodedLen(), want)
		}
		// The checksum is the last header word and covers the data only.
		var want uint32
		if in.Version <= 4 {
			want = adler32.Checksum(in.Data)
		} else {
			want = crc32.Checksum(in.Data, crc32.MakeTable(crc32.Castagnoli))
		}
		if got := binary.LittleEndian.Uint32(b[hs-4:]); got != want {
			t.Fatalf("v%d: stored checksum 0x%08x, want 0x%08x", in.Version, got, want)
		}
		out, n, err := DecodeFRD(b)
		if err != nil {
			t.Fatalf("v%d: %v", in.Version, err)
		}
		if n != len(b) {
			t.Fatalf("v%d: consumed %d of %d", in.Version, n, len(b))
		}
		if !bytes.Equal(out.Data, in.Data) {
			t.Fatalf("v%d: data differs", in.Version)
		}
		in.Checksum = want
		out.Data, in.Data = nil, nil
		if !reflect.DeepEqual(out, in) {
			t.Fatalf("v%d: decoded %+v, want %+v", in.Version, out, in)
		}
	}
}

func TestFRDHeaderLayout(t *testing.T) {
	// v6: version in the low 16 bits, flags in the high 16 of the first word.
	b, _ := AppendFRD(nil, &FRDEvent{Version: 6, Flags: 1, Run: 2, Lumi: 3, Event: 4})
	if w := binary.LittleEndian.Uint32(b); w != 0x0001_0006 {
		t.Fatalf("v6 first word 0x%08x", w)
	}
	// v4: event number split low word then high word, eventSize after.
	b, _ = AppendFRD(nil, &FRDEvent{Version: 4, Event: 0xAAAA_BBBB_CCCC_DDDD, Data: make([]byte, 8)})
	if lo, hi, sz := binary.LittleEndian.Uint32(b[12:]), binary.LittleEndian.Uint32(b[16:]), binary.LittleEndian.Uint32(b[20:]); lo != 0xCCCCDDDD || hi != 0xAAAABBBB || sz != 8 {
		t.Fatalf("v4 event words 0x%08x 0x%08x size %d", lo, hi, sz)
	}
	for v, want := range map[uint16]int{1: 0, 2: 0, 3: 28, 4: 32, 5: 24, 6: 24, 7: 0} {
		if got := FRDHeaderSize(v); got != want {
			t.Errorf("FRDHeaderSize(%d) = %d, want %d", v, got, want)
		}
	}
}

func TestAppendFRDRejects(t *testing.T) {
	for name, e := range map[string]FRDEvent{
		"version 2":          {Version: 2},
		"64-bit event in v5": {Version: 5, Event: 1 << 32},
		"flags in v5":        {Version: 5, Flags: 1},
		"padding in v6":      {Version: 6, Padding: 4},
	} {
		if _, err := AppendFRD(nil, &e); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestDecodeFRDErrors(t *testing.T) {
	evs := testEvents(t)
	v3, _ := AppendFRD(nil, &evs[0])
	v5, _ := AppendFRD(nil, &evs[2])
	mod := func(b []byte, f func(b []byte)) []byte { c := append([]byte(nil), b...); f(c); return c }
	cases := []struct {
		name     string
		b        []byte
		sentinel error
		off      int64
	}{
		{"no version", v5[:3], schemas.ErrTruncated, 0},
		{"short header", v5[:20], schemas.ErrTruncated, 0},
		{"version 2", mod(v5, func(b []byte) { b[0] = 2 }), schemas.ErrBadVersion, 0},
		{"version 7", mod(v5, func(b []byte) { b[0] = 7 }), schemas.ErrBadVersion, 0},
		{"data truncated", v5[:len(v5)-1], schemas.ErrTruncated, 24},
		{"padding truncated", v3[:len(v3)-1], schemas.ErrTruncated, 28},
		{"size overflow", mod(v5, func(b []byte) { binary.LittleEndian.PutUint32(b[16:], 0xFFFFFFFF) }), schemas.ErrTruncated, 24},
		{"adler32 mismatch", mod(v3, func(b []byte) { b[40] ^= 0x80 }), schemas.ErrCRCMismatch, 24},
		{"crc32c mismatch", mod(v5, func(b []byte) { b[30] ^= 0x01 }), schemas.ErrCRCMismatch, 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := DecodeFRD(c.b)
			decodetest.Want(t, err, c.sentinel, c.off)
		})
	}
}

func TestFRDFileRoundTrip(t *testing.T) {
	evs := testEvents(t)
	for _, h := range []*FRDFileHeader{nil, {Version: 1, Lumi: 17}, {Version: 2, DataType: 1, Run: 362000, Lumi: 17}} {
		b, err := AppendFRDFile(nil, h, evs)
		if err != nil {
			t.Fatal(err)
		}
		fr, err := NewFileReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if h == nil {
			if fr.Header() != nil {
				t.Fatal("header found in a file without one")
			}
		} else {
			got := fr.Header()
			if got == nil || got.Version != h.Version || got.Lumi != h.Lumi || got.Run != h.Run || got.DataType != h.DataType ||
				got.EventCount != uint32(len(evs)) || got.FileSize != uint64(len(b)) {
				t.Fatalf("header %+v, want %+v with %d events and %d bytes", got, h, len(evs), len(b))
			}
		}
		for i := range evs {
			e, err := fr.Next()
			if err != nil {
				t.Fatalf("event %d: %v", i, err)
			}
			if e.Event != evs[i].Event || e.Version != evs[i].Version || !bytes.Equal(e.Data, evs[i].Data) {
				t.Fatalf("event %d: read v%d event %d", i, e.Version, e.Event)
			}
		}
		if _, err := fr.Next(); err != io.EOF {
			t.Fatalf("after the last event: %v, want io.EOF", err)
		}
		if fr.Offset() != int64(len(b)) {
			t.Fatalf("offset %d at the end, file has %d bytes", fr.Offset(), len(b))
		}
	}
}

func TestFRDFileErrors(t *testing.T) {
	evs := testEvents(t)
	withHdr, _ := AppendFRDFile(nil, &FRDFileHeader{Version: 2, Run: 1}, evs)
	second := int64(32 + evs[0].EncodedLen()) // offset of event 1
	readAll := func(b []byte) error {
		fr, err := NewFileReader(bytes.NewReader(b))
		if err != nil {
			return err
		}
		for {
			if _, err := fr.Next(); err != nil {
				return err
			}
		}
	}
	mod := func(f func(b []byte)) []byte { c := append([]byte(nil), withHdr...); f(c); return c }
	cases := []struct {
		name     string
		b        []byte
		sentinel error
		off      int64
	}{
		{"bad file version", mod(func(b []byte) { copy(b[4:], "0003") }), schemas.ErrBadVersion, 4},
		{"bad header size", mod(func(b []byte) { b[8] = 24 }), schemas.ErrBadHeader, 8},
		{"truncated file header", withHdr[:20], schemas.ErrTruncated, 0},
		{"truncated second event header", withHdr[:second+10], schemas.ErrTruncated, second},
		{"truncated second event data", withHdr[:second+40], schemas.ErrTruncated, second},
		{"bad second event version", mod(func(b []byte) { b[second] = 9 }), schemas.ErrBadVersion, second},
		{"second event crc", mod(func(b []byte) { b[second+40] ^= 1 }), schemas.ErrCRCMismatch, second + 28},
		{"event count", mod(func(b []byte) { b[12] = 9 }), schemas.ErrInconsistent, int64(len(withHdr))},
		{"file size", mod(func(b []byte) { b[24]++ }), schemas.ErrInconsistent, int64(len(withHdr))},
		{"huge event size", mod(func(b []byte) { binary.LittleEndian.PutUint32(b[second+20:], 0xFFFFFFF0) }), schemas.ErrSizeOverflow, second + 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			decodetest.Want(t, readAll(c.b), c.sentinel, c.off)
		})
	}
	// A checksum mismatch returns the event and the reader goes on.
	fr, _ := NewFileReader(bytes.NewReader(cases[6].b))
	fr.Next()
	if e, err := fr.Next(); !errors.Is(err, schemas.ErrCRCMismatch) || e.Event != evs[1].Event {
		t.Fatalf("corrupt event: %+v, %v", e.Event, err)
	}
	if e, err := fr.Next(); err != nil || e.Event != evs[2].Event {
		t.Fatalf("after the corrupt event: %d, %v", e.Event, err)
	}
}

func TestDecodeFRDFileHeaderErrors(t *testing.T) {
	good, _ := AppendFRDFileHeader(nil, &FRDFileHeader{Version: 2, EventCount: 1, FileSize: 100})
	cases := []struct {
		name     string
		b        []byte
		sentinel error
		off      int64
	}{
		{"no id", good[:6], schemas.ErrTruncated, 0},
		{"bad magic", append([]byte("RAX_"), good[4:]...), schemas.ErrBadMagic, 0},
		{"bad version", append([]byte("RAW_0003"), good[8:]...), schemas.ErrBadVersion, 4},
		{"truncated v2", good[:30], schemas.ErrTruncated, 0},
		{"header size", append(append([]byte(nil), good[:8]...), append([]byte{24, 0}, good[10:]...)...), schemas.ErrBadHeader, 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := DecodeFRDFileHeader(c.b)
			decodetest.Want(t, err, c.sentinel, c.off)
		})
	}
	if _, err := AppendFRDFileHeader(nil, &FRDFileHeader{Version: 1, EventCount: 1 << 16}); err == nil {
		t.Fatal("v1 header with a 17-bit event count accepted")
	}
}
