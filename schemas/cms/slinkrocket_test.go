package cms

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/sluice-daq/sluice/internal/decodetest"
	"github.com/sluice-daq/sluice/schemas"
)

func testSlinkRocket(src uint32, words int) SlinkRocket {
	p := make([]byte, SlinkRocketWordSize*words)
	for i := range p {
		p[i] = byte(src) + byte(i)
	}
	return SlinkRocket{SourceID: src, L1ATypes: 0x0102, PhysType: 7, EmuStatus: 2, EventID: 1<<44 - 3,
		Status: SlinkRocketFragmentCut | SlinkRocketFEDCRCError, CRC: 0xBEEF, OrbitID: 123456789, BXID: 3563, DAQCRC: 0xCAFE, Payload: p}
}

func mustSlinkRocket(t testing.TB, f SlinkRocket) []byte {
	t.Helper()
	b, err := AppendSlinkRocket(nil, &f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSlinkRocketLayout(t *testing.T) {
	in := testSlinkRocket(0x12345678, 2)
	b := mustSlinkRocket(t, in)
	le := binary.LittleEndian
	if len(b) != 64 {
		t.Fatalf("%d bytes, want 64", len(b))
	}
	if le.Uint32(b) != 0x12345678 || le.Uint16(b[4:]) != 0x0102 || b[6] != 7 || b[7] != 2 {
		t.Fatalf("header low word % x", b[:8])
	}
	if w := le.Uint64(b[8:]); w != 0x55_3_00_FFFFFFFFFFD {
		t.Fatalf("header high word 0x%016x: want BOE 0x55, version 3, event id 2^44-3", w)
	}
	tr := b[48:]
	if le.Uint16(tr) != 0x11 || le.Uint16(tr[2:]) != 0xBEEF || le.Uint32(tr[4:]) != 123456789 {
		t.Fatalf("trailer low words % x", tr[:8])
	}
	if w := le.Uint32(tr[8:]); w != 4<<12|3563 {
		t.Fatalf("event_length/bx word 0x%08x: want 4 words, bx 3563", w)
	}
	if w := le.Uint32(tr[12:]); w != 0xAA_CAFE_00 {
		t.Fatalf("last word 0x%08x: want EOE 0xAA, daq_crc 0xCAFE", w)
	}
	out, err := DecodeSlinkRocket(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("decoded %+v, want %+v", out, in)
	}
	if _, err := AppendSlinkRocket(nil, &SlinkRocket{EventID: 1 << 44}); err == nil {
		t.Fatal("45-bit event id accepted")
	}
	if _, err := AppendSlinkRocket(nil, &SlinkRocket{Payload: make([]byte, 8)}); err == nil {
		t.Fatal("half-word payload accepted")
	}
}

func TestDecodeSlinkRocketErrors(t *testing.T) {
	good := mustSlinkRocket(t, testSlinkRocket(1, 1)) // 48 bytes
	mod := func(i int, v byte) []byte { b := append([]byte(nil), good...); b[i] = v; return b }
	cases := []struct {
		name     string
		b        []byte
		sentinel error
		off      int64
	}{
		{"truncated", good[:16], schemas.ErrTruncated, 0},
		{"not whole words", good[:40], schemas.ErrBadHeader, 0},
		{"length mismatch", good[16:], schemas.ErrInconsistent, 24},
		{"bad BOE", mod(15, 0x54), schemas.ErrBadMagic, 15},
		{"bad version", mod(14, 0x20), schemas.ErrBadVersion, 14},
		{"bad EOE", mod(47, 0xAB), schemas.ErrBadMagic, 47},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeSlinkRocket(c.b)
			decodetest.Want(t, err, c.sentinel, c.off)
		})
	}
}

func slinkRocketBlock(t testing.TB, srcs ...uint32) []byte {
	var b []byte
	for i, s := range srcs {
		b = append(b, mustSlinkRocket(t, testSlinkRocket(s, i))...)
	}
	return b
}

func TestWalkSlinkRockets(t *testing.T) {
	data := slinkRocketBlock(t, 5, 6, 7) // 32, 48, 64 bytes
	var srcs []uint32
	var offs []int
	if err := WalkSlinkRockets(data, func(off int, f SlinkRocket) bool {
		srcs, offs = append(srcs, f.SourceID), append(offs, off)
		if !bytes.Equal(f.Payload, testSlinkRocket(f.SourceID, int(f.SourceID-5)).Payload) {
			t.Errorf("source %d: payload differs", f.SourceID)
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if !equal(srcs, []uint32{7, 6, 5}) || !equal(offs, []int{80, 32, 0}) {
		t.Fatalf("visited %v at %v", srcs, offs)
	}
	mod := func(f func(b []byte)) []byte { b := append([]byte(nil), data...); f(b); return b }
	setLen := func(b []byte, tr int, words uint32) { binary.LittleEndian.PutUint32(b[tr+8:], words<<12) }
	cases := []struct {
		name     string
		b        []byte
		sentinel error
		off      int64
	}{
		{"not whole words", data[:100], schemas.ErrBadHeader, 0},
		{"bad EOE", mod(func(b []byte) { b[143] = 0 }), schemas.ErrBadMagic, 143},
		{"length beyond start", mod(func(b []byte) { setLen(b, 128, 10) }), schemas.ErrSizeOverflow, 136},
		{"length under 2 words", mod(func(b []byte) { setLen(b, 128, 1) }), schemas.ErrSizeOverflow, 136},
		{"bad BOE of middle", mod(func(b []byte) { b[32+15] = 0 }), schemas.ErrBadMagic, 47},
		{"lone word before first", append(make([]byte, 16), data[:32]...), schemas.ErrTruncated, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			decodetest.Want(t, WalkSlinkRockets(c.b, func(int, SlinkRocket) bool { return true }), c.sentinel, c.off)
		})
	}
}

func FuzzDecodeSlinkRocket(f *testing.F) {
	f.Add(mustSlinkRocket(f, testSlinkRocket(1, 0)))
	f.Add(mustSlinkRocket(f, testSlinkRocket(2, 3)))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSlinkRocket(b)
		decodetest.Check(t, err, len(b))
		if err == nil {
			out, err := AppendSlinkRocket(nil, &s)
			if err != nil {
				t.Fatal(err)
			}
			again, err := DecodeSlinkRocket(out)
			if err != nil || !reflect.DeepEqual(again, s) {
				t.Fatalf("re-encoded %+v, decoded %+v: %v", s, again, err)
			}
		}
	})
}

func FuzzWalkSlinkRockets(f *testing.F) {
	f.Add(slinkRocketBlock(f, 5, 6, 7))
	f.Fuzz(func(t *testing.T, b []byte) {
		end := len(b)
		err := WalkSlinkRockets(b, func(off int, s SlinkRocket) bool {
			if off+len(s.Payload)+SlinkRocketMinSize != end {
				t.Fatalf("fragment at %d does not end where the previous began (%d)", off, end)
			}
			end = off
			return true
		})
		decodetest.Check(t, err, len(b))
	})
}
