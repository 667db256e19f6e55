package atlas

import (
	"encoding/binary"
	"errors"
	"hash/adler32"
	"reflect"
	"testing"

	"github.com/sluice-daq/sluice/internal/decodetest"
	"github.com/sluice-daq/sluice/schemas"
)

var orders = []ByteOrder{binary.LittleEndian, binary.BigEndian}

func TestCRC16CCITTCheck(t *testing.T) {
	if got := ccittUpdate(0xFFFF, []byte("123456789")...); got != 0x29B1 {
		t.Fatalf("CRC-16/CCITT-FALSE(\"123456789\") = 0x%04X, want 0x29B1", got)
	}
	// Words are fed most significant byte first: "12345678" as two words.
	if got, want := CRC16CCITT([]uint32{0x31323334, 0x35363738}), uint32(ccittUpdate(0xFFFF, []byte("12345678")...)); got != want {
		t.Fatalf("CRC16CCITT(words) = 0x%04X, want 0x%04X", got, want)
	}
}

func TestAdler32Words(t *testing.T) {
	// Words are laid out little-endian: 0x64636261 is "abcd".
	if got, want := Adler32([]uint32{0x64636261, 0x68676665}), adler32.Checksum([]byte("abcdefgh")); got != want {
		t.Fatalf("Adler32 = 0x%08x, want 0x%08x", got, want)
	}
	big := make([]uint32, 3000) // crosses the 4 KiB staging buffer
	raw := make([]byte, 4*len(big))
	for i := range big {
		big[i] = uint32(i * 2654435761)
		binary.LittleEndian.PutUint32(raw[4*i:], big[i])
	}
	if Adler32(big) != adler32.Checksum(raw) {
		t.Fatal("Adler32 over 3000 words differs from zlib's over their bytes")
	}
}

func testROD(src uint32, ndata int, after bool) ROD {
	d := make([]uint32, ndata)
	for i := range d {
		d[i] = src<<8 | uint32(i)
	}
	return ROD{Version: RODVersion, SourceID: src, Run: 431000, L1ID: 0x01000007, BCID: 1234, L1TriggerType: 0x81,
		DetEventType: 5, Status: []uint32{0, 0xCAFE}, Data: d, StatusAfterData: after}
}

func testROB(src uint32, ck ChecksumType, ndata int) ROB {
	rod := testROD(src, ndata, ndata%2 == 1)
	return ROB{Version: VersionV40, SourceID: src, Status: []uint32{0}, ChecksumType: ck, Payload: rod.AppendWords(nil)}
}

func testEvent(ck ChecksumType) FullEvent {
	return FullEvent{
		Version: VersionV40, SourceID: 0x7c0000, Status: []uint32{0}, ChecksumType: ck,
		BCTimeSeconds: 1700000000, BCTimeNanoseconds: 25, GlobalID: 123456, RunType: 1, RunNumber: 431000,
		LumiBlock: 77, L1ID: 0x01000007, BCID: 1234, L1TriggerType: 0x81,
		L1Info: []uint32{1, 2, 3}, L2Info: []uint32{}, EFInfo: []uint32{9}, StreamTags: []uint32{0x73747265, 0x616d0000},
		ROBs: []ROB{testROB(0x110000, ChecksumNone, 4), testROB(0x420001, ChecksumCRC16CCITT, 3), testROB(0x7c0002, ChecksumAdler32, 0)},
	}
}

func TestRODRoundTrip(t *testing.T) {
	for _, o := range orders {
		for _, after := range []bool{false, true} {
			in := testROD(0x42, 5, after)
			b := AppendROD(nil, &in, o)
			if len(b) != 4*in.Words() || in.Words() != 12+2+5 {
				t.Fatalf("%d bytes for %d words", len(b), in.Words())
			}
			out, got, err := DecodeROD(b)
			if err != nil {
				t.Fatal(err)
			}
			if got != o || !reflect.DeepEqual(out, in) {
				t.Fatalf("%v after=%v: decoded %+v, want %+v", o, after, out, in)
			}
		}
	}
	// The status position word decides where the status words are.
	in := testROD(1, 2, true)
	w := in.AppendWords(nil)
	if w[9] != 1<<8 || w[11] != 0 || w[12] != 0xCAFE || w[len(w)-1] != 1 {
		t.Fatalf("status after data: words %x", w)
	}
}

func TestDecodeRODErrors(t *testing.T) {
	in := testROD(0x42, 5, false)
	good := AppendROD(nil, &in, binary.LittleEndian) // 19 words
	mod := func(i int, v uint32) []byte {
		b := append([]byte(nil), good...)
		binary.LittleEndian.PutUint32(b[4*i:], v)
		return b
	}
	cases := []struct {
		name     string
		b        []byte
		sentinel error
		off      int64
	}{
		{"empty", nil, schemas.ErrTruncated, 0},
		{"bad marker", mod(0, 0xee1234ef), schemas.ErrBadMagic, 0},
		{"not whole words", good[:len(good)-1], schemas.ErrBadHeader, 0},
		{"under 12 words", good[:44], schemas.ErrTruncated, 0},
		{"header size", mod(1, 10), schemas.ErrBadHeader, 4},
		{"version", mod(2, 0x02000000), schemas.ErrBadVersion, 8},
		{"counts overflow", mod(16, 0xFFFFFFFF), schemas.ErrSizeOverflow, 64},
		{"counts short", mod(17, 4), schemas.ErrInconsistent, 64},
		{"status position", mod(18, 2), schemas.ErrBadHeader, 72},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := DecodeROD(c.b)
			decodetest.Want(t, err, c.sentinel, c.off)
		})
	}
}

func TestROBRoundTrip(t *testing.T) {
	for _, o := range orders {
		for _, ck := range []ChecksumType{ChecksumNone, ChecksumCRC16CCITT, ChecksumAdler32} {
			in := testROB(0x420001, ck, 6)
			b, err := AppendROB(nil, &in, o)
			if err != nil {
				t.Fatal(err)
			}
			out, n, got, err := DecodeROB(append(b, 0xFF, 0xFF)) // trailing bytes are not the ROB's
			if err != nil {
				t.Fatalf("%v %v: %v", o, ck, err)
			}
			if n != len(b) || got != o || !out.ChecksumOK {
				t.Fatalf("%v %v: n %d of %d, order %v, checksum ok %v", o, ck, n, len(b), got, out.ChecksumOK)
			}
			want, _ := Checksum(ck, in.Payload)
			if out.Checksum != want {
				t.Fatalf("%v %v: stored checksum 0x%08x, want 0x%08x", o, ck, out.Checksum, want)
			}
			in.Checksum, in.ChecksumOK, in.payloadOff = want, true, 4*8
			in.le, _ = AppendROB(nil, &in, binary.LittleEndian) // the decoder keeps the little-endian bytes
			if !reflect.DeepEqual(out, in) {
				t.Fatalf("%v %v: decoded %+v, want %+v", o, ck, out, in)
			}
			rod, err := out.ROD()
			if err != nil || rod.SourceID != 0x420001 || len(rod.Data) != 6 {
				t.Fatalf("ROD %+v: %v", rod, err)
			}
		}
	}
}

// TestROBByteSwapped checks a big-endian ROB's first bytes and that its
// marker reads 0xdd3412dd little-endian.
func TestROBByteSwapped(t *testing.T) {
	in := testROB(1, ChecksumNone, 0)
	b, _ := AppendROB(nil, &in, binary.BigEndian)
	if m := binary.LittleEndian.Uint32(b); m != 0xdd3412dd {
		t.Fatalf("swapped marker reads 0x%08x", m)
	}
	if DetectOrder(b, MarkerROB) != binary.BigEndian || DetectOrder(b, MarkerFullEvent) != nil {
		t.Fatal("DetectOrder")
	}
}

// TestROBChecksumCoverage: the checksum covers the payload words only.
func TestROBChecksumCoverage(t *testing.T) {
	for _, ck := range []ChecksumType{ChecksumCRC16CCITT, ChecksumAdler32} {
		in := testROB(7, ck, 3)
		b, _ := AppendROB(nil, &in, binary.LittleEndian)
		hdr := append([]byte(nil), b...)
		binary.LittleEndian.PutUint32(hdr[24:], 0x8) // status word 0: a header word, not covered
		if _, _, _, err := DecodeROB(hdr); err != nil {
			t.Fatalf("%v: changing a header word broke the checksum: %v", ck, err)
		}
		for _, w := range []int{8, len(b)/4 - 2} { // first and last payload word
			bad := append([]byte(nil), b...)
			bad[4*w] ^= 1
			r, _, _, err := DecodeROB(bad)
			decodetest.Want(t, err, schemas.ErrCRCMismatch, int64(len(b)-4))
			if r.ChecksumOK || r.SourceID != 7 {
				t.Fatalf("%v: mismatching ROB returned as %+v", ck, r)
			}
			// Re-encoding keeps the stored (now wrong) checksum.
			again, _ := AppendROB(nil, &r, binary.LittleEndian)
			if string(again) != string(bad) {
				t.Fatalf("%v: re-encoding a corrupt ROB hid the corruption", ck)
			}
		}
	}
}

func TestDecodeROBErrors(t *testing.T) {
	in := testROB(0x42, ChecksumAdler32, 2) // 7+1 header, 12+2+2 ROD, 1 checksum = 25 words
	good, _ := AppendROB(nil, &in, binary.BigEndian)
	mod := func(i int, v uint32) []byte {
		b := append([]byte(nil), good...)
		binary.BigEndian.PutUint32(b[4*i:], v)
		return b
	}
	cases := []struct {
		name     string
		b        []byte
		sentinel error
		off      int64
	}{
		{"empty", good[:2], schemas.ErrTruncated, 0},
		{"bad marker", mod(0, 0xdd1234de), schemas.ErrBadMagic, 0},
		{"no size word", good[:6], schemas.ErrTruncated, 4},
		{"truncated", good[:len(good)-4], schemas.ErrTruncated, 4},
		{"size beyond buffer", mod(1, 0x10000000), schemas.ErrTruncated, 4},
		{"size under generic header", mod(1, 3), schemas.ErrSizeOverflow, 4},
		{"header size > total", mod(2, 26), schemas.ErrSizeOverflow, 8},
		{"version 6", mod(3, 0x06000000), schemas.ErrBadVersion, 12},
		{"version 3", mod(3, 0x03000000), schemas.ErrBadVersion, 12},
		{"nstatus overflow", mod(5, 0xFFFFFFFF), schemas.ErrSizeOverflow, 20},
		{"header size wrong", mod(2, 9), schemas.ErrBadHeader, 8},
		{"checksum type", mod(7, 3), schemas.ErrUnsupported, 28},
		{"checksum mismatch", mod(24, 0), schemas.ErrCRCMismatch, 96},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, _, err := DecodeROB(c.b)
			decodetest.Want(t, err, c.sentinel, c.off)
		})
	}
	// The ROD inside reports offsets in the ROB's buffer.
	r, _, _, err := DecodeROB(mod(9, 8)) // ROD header size word, covered by the checksum
	if !errors.Is(err, schemas.ErrCRCMismatch) {
		t.Fatal(err)
	}
	_, err = r.ROD()
	decodetest.Want(t, err, schemas.ErrBadHeader, 36)
}
