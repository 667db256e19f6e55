package atlas

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/sluice-daq/sluice/internal/decodetest"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
	"github.com/sluice-daq/sluice/schemas/internal/summary"
)

// testEventV50 is testEvent in eformat 5.0, its ROBs too, with a global_id
// over 32 bits (v5.0 has 64).
func testEventV50(ck ChecksumType) FullEvent {
	e := testEvent(ck)
	e.Version, e.GlobalID = VersionV50, 0x1_0000_0000+123456
	for i := range e.ROBs {
		e.ROBs[i].Version = VersionV50
	}
	return e
}

// TestFullEventV50WordOrder pins the v5.0 header word order of the package
// doc, as eformat's v5 writer (eformat/write/FullEventFragment.h) places
// the words after the status: checksum type, bc time (s, ns), global_id
// low then high word, run type, run number, lumi block, lvl1_id, bcid, lvl1
// trigger type, compression type, readable payload size, then the four
// counted lists.
func TestFullEventV50WordOrder(t *testing.T) {
	e := testEventV50(ChecksumAdler32)
	b, err := AppendFullEvent(nil, &e, binary.LittleEndian)
	if err != nil {
		t.Fatal(err)
	}
	w := toWords(b, binary.LittleEndian)
	hs := 23 + 1 + 3 + 0 + 1 + 2 // nstatus 1, counts 3, 0, 1, 2
	want := []uint32{
		MarkerFullEvent, uint32(len(w)), uint32(hs), VersionV50, 0x7c0000, 1, 0, // generic header, status
		uint32(ChecksumAdler32), 1700000000, 25, 123456, 1, 1, 431000, 77, 0x01000007, 1234, 0x81,
		0, uint32(len(w) - hs - 1), // not compressed; the payload words
		3, 1, 2, 3, 0, 1, 9, 2, 0x73747265, 0x616d0000,
	}
	if !slices.Equal(w[:hs], want) {
		t.Fatalf("header words\n got %x\nwant %x", w[:hs], want)
	}
	if w[hs] != MarkerROB || w[hs+3] != VersionV50 {
		t.Fatalf("payload starts with 0x%08x version 0x%08x, want the first ROB in 5.0", w[hs], w[hs+3])
	}
	if w[len(w)-1] != Adler32(w[hs:len(w)-1]) {
		t.Fatal("trailing checksum does not cover exactly the payload words")
	}
}

// v5.0 full events round-trip in both byte orders with every checksum
// type, global_id and readable payload size included, and split and join
// back byte for byte; their ROBs (the v4.0 ROB layout) too.
func TestFullEventV50RoundTrip(t *testing.T) {
	for _, o := range orders {
		for _, ck := range []ChecksumType{ChecksumNone, ChecksumCRC16CCITT, ChecksumAdler32} {
			in := testEventV50(ck)
			b, err := AppendFullEvent(nil, &in, o)
			if err != nil {
				t.Fatal(err)
			}
			out, n, got, err := DecodeFullEvent(b)
			if err != nil || n != len(b) || got != o || !out.ChecksumOK || len(out.ROBs) != 3 {
				t.Fatalf("%v %v: %v (n %d of %d, %d ROBs)", o, ck, err, n, len(b), len(out.ROBs))
			}
			if out.Version != VersionV50 || out.GlobalID != in.GlobalID || out.CompressionType != 0 ||
				int(out.ReadablePayloadWords) != len(b)/4-out.headerWords()-b2i(ck != ChecksumNone) || out.ROBs[1].Version != VersionV50 {
				t.Fatalf("%v %v: decoded %+v", o, ck, out)
			}
			again, err := AppendFullEvent(nil, &out, o)
			if err != nil || !bytes.Equal(again, b) {
				t.Fatalf("%v %v: re-encoded event differs (%v)", o, ck, err)
			}
			frags, err := SplitFullEvent(nil, &out)
			if err != nil || len(frags) != 4 || frags[0].EventID != in.GlobalID {
				t.Fatalf("split: %d fragments, %v", len(frags), err)
			}
			joined, err := JoinFullEvent(nil, &out, func(yield func([]byte) bool) {
				for _, f := range frags[:3] {
					if !yield(f.Payload) {
						return
					}
				}
			}, o)
			if err != nil || !bytes.Equal(joined, b) {
				t.Fatalf("%v %v: joined event differs (%v)", o, ck, err)
			}
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// What v5.0 has that is not read is refused with its offset: a compressed
// payload, and a header too small for v5.0's fixed words. A v4.0 event
// cannot carry a 64-bit global_id.
func TestFullEventV50Errors(t *testing.T) {
	e := testEventV50(ChecksumNone)
	good, err := AppendFullEvent(nil, &e, binary.LittleEndian)
	if err != nil {
		t.Fatal(err)
	}
	mod := func(i int, v uint32) []byte {
		b := slices.Clone(good)
		binary.LittleEndian.PutUint32(b[4*i:], v)
		return b
	}
	_, _, _, err = DecodeFullEvent(mod(18, 1)) // compression type
	decodetest.Want(t, err, schemas.ErrUnsupported, 4*18)
	_, _, _, err = DecodeFullEvent(mod(2, 22)) // header_size under 6 + 1 + 17
	decodetest.Want(t, err, schemas.ErrSizeOverflow, 20)
	v4 := testEvent(ChecksumNone)
	v4.GlobalID = 1 << 32
	if _, err := AppendFullEvent(nil, &v4, binary.LittleEndian); err == nil {
		t.Fatal("a v4.0 event with a 33-bit global_id encoded")
	}
	e.CompressionType = 1
	if _, err := AppendFullEvent(nil, &e, binary.LittleEndian); err == nil {
		t.Fatal("a compressed v5.0 event encoded")
	}
}

// inspect reads a v5.0 stream and says so.
func TestInspectV50(t *testing.T) {
	var stream []byte
	for k := range 3 {
		e := testEventV50(ChecksumCRC16CCITT)
		e.GlobalID += uint64(k)
		var err error
		if stream, err = AppendFullEvent(stream, &e, binary.BigEndian); err != nil {
			t.Fatal(err)
		}
	}
	s, _, err := format.NewStream(bytes.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := FullEventFormat.Inspect(s, 0)
	if err != nil {
		t.Fatal(err)
	}
	a := rep.Section.(*Report)
	if rep.Events != 3 || a.V50Events != 3 || a.GlobalIDRange != [2]uint64{0x1_0000_0000 + 123456, 0x1_0000_0000 + 123458} ||
		rep.Checksums.Valid != 9 || rep.Checksums.Absent != 3 || rep.Checksums.Bad != 0 || a.ByteOrder != "big-endian" {
		t.Fatalf("report %+v, atlas %+v", rep, a)
	}
	// The versions line names the versions there are (no "others").
	var lines []string
	a.Lines(func(key, f string, args ...any) { lines = append(lines, key+": "+fmt.Sprintf(f, args...)) })
	if !slices.Contains(lines, "eformat versions: 3 in 5.0") {
		t.Fatalf("lines %q", lines)
	}
	// With a v4.0 event too, both are counted; that one, without any
	// checksum, says so.
	v4 := testEvent(ChecksumNone)
	for i := range v4.ROBs {
		v4.ROBs[i].ChecksumType = ChecksumNone
	}
	if stream, err = AppendFullEvent(stream, &v4, binary.BigEndian); err != nil {
		t.Fatal(err)
	}
	if s, _, err = format.NewStream(bytes.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	if rep, err = FullEventFormat.Inspect(s, 4); err != nil {
		t.Fatal(err)
	}
	if a := rep.Section.(*Report); a.versions() != "1 in 4.0, 3 in 5.0" || a.V40Events != 1 {
		t.Fatalf("versions %q, atlas %+v", a.versions(), a)
	}
	rows := rep.Detail.Rows.([]summary.Record)
	if len(rows) != 4 || rows[0].ChecksumAbsent || rows[0].Checksum() != "ok" || !rows[3].ChecksumAbsent || rows[3].Checksum() != "no checksum" {
		t.Fatalf("rows %+v", rows)
	}
}
