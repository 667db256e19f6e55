package atlas

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/sluice-daq/sluice/internal/decodetest"
	"github.com/sluice-daq/sluice/schemas"
)

// TestFullEventWordOrder pins the v4.0 header word order of the package doc.
func TestFullEventWordOrder(t *testing.T) {
	e := testEvent(ChecksumAdler32)
	b, err := AppendFullEvent(nil, &e, binary.LittleEndian)
	if err != nil {
		t.Fatal(err)
	}
	w := toWords(b, binary.LittleEndian)
	hs := 20 + 1 + 3 + 0 + 1 + 2 // nstatus 1, counts 3, 0, 1, 2
	want := []uint32{
		MarkerFullEvent, uint32(len(w)), uint32(hs), VersionV40, 0x7c0000, 1, 0, // generic header, status
		uint32(ChecksumAdler32), 1700000000, 25, 123456, 1, 431000, 77, 0x01000007, 1234, 0x81,
		3, 1, 2, 3, 0, 1, 9, 2, 0x73747265, 0x616d0000,
	}
	if !slices.Equal(w[:hs], want) {
		t.Fatalf("header words\n got %x\nwant %x", w[:hs], want)
	}
	if w[hs] != MarkerROB {
		t.Fatalf("payload starts with 0x%08x, want the first ROB", w[hs])
	}
	if w[len(w)-1] != Adler32(w[hs:len(w)-1]) {
		t.Fatal("trailing checksum does not cover exactly the payload words")
	}
}

func TestFullEventRoundTrip(t *testing.T) {
	for _, o := range orders {
		for _, ck := range []ChecksumType{ChecksumNone, ChecksumCRC16CCITT, ChecksumAdler32} {
			in := testEvent(ck)
			b, err := AppendFullEvent(nil, &in, o)
			if err != nil {
				t.Fatal(err)
			}
			out, n, got, err := DecodeFullEvent(b)
			if err != nil {
				t.Fatalf("%v %v: %v", o, ck, err)
			}
			if n != len(b) || got != o || !out.ChecksumOK || len(out.ROBs) != 3 {
				t.Fatalf("%v %v: n %d of %d, order %v, ok %v, %d ROBs", o, ck, n, len(b), got, out.ChecksumOK, len(out.ROBs))
			}
			// Compare after re-encoding: the decoded event writes the same bytes.
			again, err := AppendFullEvent(nil, &out, o)
			if err != nil || !bytes.Equal(again, b) {
				t.Fatalf("%v %v: re-encoded event differs (%v)", o, ck, err)
			}
			out.ROBs, in.ROBs = nil, nil
			in.Checksum, in.ChecksumOK = out.Checksum, true
			if !reflect.DeepEqual(out, in) {
				t.Fatalf("%v %v: decoded %+v, want %+v", o, ck, out, in)
			}
		}
	}
}

func TestDecodeFullEventErrors(t *testing.T) {
	e := testEvent(ChecksumCRC16CCITT)
	good, _ := AppendFullEvent(nil, &e, binary.LittleEndian)
	n := len(good) / 4
	hs := 27 // see TestFullEventWordOrder
	r0, r1 := testROB(0, ChecksumNone, 4), testROB(0, ChecksumCRC16CCITT, 3)
	rob1 := hs + r0.Words() // word index of the second ROB
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
		{"bad marker", mod(0, MarkerROB), schemas.ErrBadMagic, 0},
		{"truncated", good[:len(good)-8], schemas.ErrTruncated, 4},
		{"size beyond buffer", mod(1, uint32(n+1)), schemas.ErrTruncated, 4},
		{"header size > total", mod(2, uint32(n+1)), schemas.ErrSizeOverflow, 8},
		{"header too small for fixed words", mod(2, 20), schemas.ErrSizeOverflow, 20},
		{"version 6", mod(3, 0x06000000), schemas.ErrBadVersion, 12},
		{"L1 info count overflow", mod(17, 0xFFFFFFFF), schemas.ErrSizeOverflow, 68},
		{"stream tag count overflow", mod(24, 3), schemas.ErrSizeOverflow, 96},
		{"header size too large for fields", mod(2, uint32(hs+1)), schemas.ErrInconsistent, 8},
		{"ROB marker", mod(hs, 0), schemas.ErrBadMagic, int64(4 * hs)},
		{"ROB size past payload", mod(rob1+1, uint32(n)), schemas.ErrSizeOverflow, int64(4*rob1 + 4)},
		{"ROB size zero", mod(rob1+1, 0), schemas.ErrSizeOverflow, int64(4*rob1 + 4)},
		{"event checksum", mod(n-1, 0), schemas.ErrCRCMismatch, int64(4 * (n - 1))},
		{"ROB checksum", mod(rob1+10, 0), schemas.ErrCRCMismatch, int64(4 * (rob1 + r1.Words() - 1))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, _, err := DecodeFullEvent(c.b)
			decodetest.Want(t, err, c.sentinel, c.off)
		})
	}
	// A ROB checksum failure keeps the event, flags the ROB; the event's own
	// checksum (over all ROB words) fails too.
	ev, _, _, err := DecodeFullEvent(cases[len(cases)-1].b)
	if !errors.Is(err, schemas.ErrCRCMismatch) || len(ev.ROBs) != 3 || ev.ROBs[1].ChecksumOK || !ev.ROBs[0].ChecksumOK || ev.ChecksumOK {
		t.Fatalf("corrupt ROB: %d ROBs, ok %v %v, event ok %v, err %v", len(ev.ROBs), ev.ROBs[0].ChecksumOK, ev.ROBs[1].ChecksumOK, ev.ChecksumOK, err)
	}
}

func TestSplitJoinFullEvent(t *testing.T) {
	for _, o := range orders {
		in := testEvent(ChecksumAdler32)
		orig, _ := AppendFullEvent(nil, &in, o)
		ev, _, _, err := DecodeFullEvent(orig)
		if err != nil {
			t.Fatal(err)
		}
		frags, err := SplitFullEvent(nil, &ev)
		if err != nil {
			t.Fatal(err)
		}
		if len(frags) != 4 || frags[3].SourceID != HeaderSource || frags[3].EventID != 123456 {
			t.Fatalf("%d fragments, want 3 ROBs and the header", len(frags))
		}
		// The header fragment is the event without ROBs, then the ROB list.
		hdr, n, _, err := DecodeFullEvent(frags[3].Payload)
		if err != nil || len(hdr.ROBs) != 0 || hdr.L1ID != in.L1ID || !slices.Equal(hdr.StreamTags, in.StreamTags) ||
			!slices.Equal(toWords(frags[3].Payload[n:], binary.LittleEndian), []uint32{3, 0x110000, 0x420001, 0x7c0002}) {
			t.Fatalf("header fragment: %+v, %v", hdr, err)
		}
		for i, f := range frags[:3] {
			r := &in.ROBs[i]
			if f.SourceID != r.SourceID || f.EventID != 123456 || f.Flags != 0 || !f.CRCValid() {
				t.Fatalf("fragment %d: %+v", i, f)
			}
			rob, n, got, err := DecodeROB(f.Payload)
			if err != nil || n != len(f.Payload) || got != binary.LittleEndian || rob.SourceID != r.SourceID {
				t.Fatalf("fragment %d payload: %v", i, err)
			}
		}
		out, err := JoinFullEvent(nil, &ev, func(yield func([]byte) bool) {
			for _, f := range frags[:3] {
				if !yield(f.Payload) {
					return
				}
			}
		}, o)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, orig) {
			t.Fatalf("%v: joined event differs from the original", o)
		}
	}
}

func TestSplitFullEventFlags(t *testing.T) {
	in := testEvent(ChecksumNone)
	in.ROBs[0].Status = []uint32{StatusTimeout}
	b, _ := AppendFullEvent(nil, &in, binary.LittleEndian)
	binary.LittleEndian.PutUint32(b[len(b)-8:], 0xBAD) // last ROD trailer word inside the Adler-32 ROB
	ev, _, _, err := DecodeFullEvent(b)
	if !errors.Is(err, schemas.ErrCRCMismatch) {
		t.Fatal(err)
	}
	frags, err := SplitFullEvent(nil, &ev)
	if err != nil {
		t.Fatal(err)
	}
	if frags[0].Flags != schemas.FlagSourceError || frags[1].Flags != 0 || frags[2].Flags != schemas.FlagSourceError {
		t.Fatalf("flags %b %b %b, want the timed-out and the corrupt ROB flagged", frags[0].Flags, frags[1].Flags, frags[2].Flags)
	}
	// The corrupt ROB travels with its stored checksum and joins back as is.
	out, err := JoinFullEvent(nil, &ev, slices.Values([][]byte{frags[0].Payload, frags[1].Payload, frags[2].Payload}), binary.LittleEndian)
	if err != nil || !bytes.Equal(out, b) {
		t.Fatalf("join of a corrupt event differs: %v", err)
	}
	ev.ROBs = append(ev.ROBs, ev.ROBs[1])
	if _, err := SplitFullEvent(nil, &ev); !errors.Is(err, schemas.ErrInconsistent) {
		t.Fatalf("duplicate ROB: %v", err)
	}
	_, err = JoinFullEvent(nil, &ev, slices.Values([][]byte{frags[0].Payload[:20]}), binary.LittleEndian)
	decodetest.Want(t, err, schemas.ErrTruncated, 4)
}
