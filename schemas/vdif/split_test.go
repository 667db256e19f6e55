package vdif

import (
	"bytes"
	"testing"

	"github.com/sluice-daq/sluice/schemas"
)

func TestSourceAndEventIDs(t *testing.T) {
	fs := frames(t, sample(t, "sample.vdif"))
	h := fs[0].Header
	if got := SourceID(&h); got != 0xfffc<<10|1 {
		t.Fatalf("source id %#x", got)
	}
	if got := EventID(&h); got != 28<<56|14363767<<24 {
		t.Fatalf("event id %#x", got)
	}
	st, th := SplitSourceID(SourceID(&h))
	ep, sec, fr := SplitEventID(EventID(&fs[9].Header))
	if st != 0xfffc || th != 1 || ep != 28 || sec != 14363767 || fr != 1 {
		t.Fatalf("split ids: %d %d %d %d %d", st, th, ep, sec, fr)
	}
	// Same instant, same id on every thread; later frames, larger ids.
	for i, f := range fs {
		if EventID(&f.Header) != EventID(&fs[i/8*8].Header) {
			t.Fatalf("frame %d: event id differs from its thread-mates", i)
		}
	}
	if EventID(&fs[8].Header) != EventID(&fs[0].Header)+1 {
		t.Fatal("frame 1 is not event id + 1")
	}
	// A new second (frame number back to 0) and a new epoch still grow.
	a, b, c := edv0Header(0, 10, 1599), edv0Header(0, 11, 0), edv0Header(0, 0, 0)
	c.RefEpoch = a.RefEpoch + 1
	if !(EventID(&a) < EventID(&b) && EventID(&b) < EventID(&c)) {
		t.Fatal("event ids not monotonic over a second and an epoch boundary")
	}
	a.StationID, a.ThreadID = 0xffff, 1023
	if SourceID(&a) != 1<<26-1 {
		t.Fatalf("largest source id %#x", SourceID(&a))
	}
}

func TestFrameFragment(t *testing.T) {
	f := frames(t, sample(t, "sample.vdif"))[3]
	frag := FrameFragment(&f)
	if frag.SourceID != 0xfffc<<10|7 || frag.EventID != EventID(&f.Header) || !bytes.Equal(frag.Payload, f.Bytes) || !frag.CRCValid() || frag.Flags != 0 {
		t.Fatalf("fragment %+v", frag)
	}
	f.Header.Invalid = true
	if FrameFragment(&f).Flags != schemas.FlagSourceError {
		t.Fatal("invalid frame not flagged")
	}
}

func TestScanSources(t *testing.T) {
	got, err := ScanSources(bytes.NewReader(sample(t, "sample.vdif")))
	if err != nil {
		t.Fatal(err)
	}
	want := []uint32{1, 3, 5, 7, 0, 2, 4, 6}
	if len(got) != len(want) {
		t.Fatalf("sources %v", got)
	}
	for i := range want {
		if got[i] != 0xfffc<<10|want[i] {
			t.Fatalf("sources %v", got)
		}
	}
	if _, err := ScanSources(bytes.NewReader(sample(t, "sample.vdif")[:100])); err == nil {
		t.Fatal("truncated stream: want an error")
	}
}

// decodeMFPs splits a buffer of back-to-back MFPs.
func decodeMFPs(t *testing.T, b []byte) []schemas.MFP {
	t.Helper()
	var out []schemas.MFP
	for len(b) > 0 {
		p, n, err := schemas.DecodeMFP(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
		b = b[n:]
	}
	return out
}

func TestPackerSample(t *testing.T) {
	fs := frames(t, sample(t, "sample.vdif"))
	p, err := NewPacker(2)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for i := range fs {
		out = p.Add(out, &fs[i])
	}
	if rest := p.Flush(nil); len(rest) != 0 {
		t.Fatalf("%d bytes left after full packets", len(rest))
	}
	pkts := decodeMFPs(t, out)
	if len(pkts) != 8 || p.Packets != 8 || p.Frames != 16 {
		t.Fatalf("%d packets (%d counted, %d frames)", len(pkts), p.Packets, p.Frames)
	}
	for k, pk := range pkts {
		// Packets complete in frame-1 order: threads 1,3,5,7,0,2,4,6.
		first := fs[k]
		if pk.SourceID != SourceID(&first.Header) || pk.FirstEventID != EventID(&first.Header) || pk.N != 2 {
			t.Fatalf("packet %d: source %d first %#x n %d", k, pk.SourceID, pk.FirstEventID, pk.N)
		}
		pk.Fragments(func(i int, id uint64, crc uint32, payload []byte) bool {
			want := fs[k+8*i]
			if !bytes.Equal(payload, want.Bytes) || crc != schemas.Checksum(payload) || id != EventID(&want.Header) {
				t.Fatalf("packet %d fragment %d differs", k, i)
			}
			return true
		})
	}
	if _, err := NewPacker(0); err == nil {
		t.Fatal("packing factor 0: want an error")
	}
}

// TestPackerBreaks checks that a packet closes at a second boundary, a
// missing frame and a change of the invalid flag.
func TestPackerBreaks(t *testing.T) {
	var b []byte
	payload := make([]byte, 32)
	for _, hf := range []struct {
		sec, fr uint32
		invalid bool
	}{{10, 0, false}, {10, 1, false}, {10, 2, false}, {11, 0, false}, {11, 2, false}, {11, 3, true}, {11, 4, true}} {
		h := edv0Header(3, hf.sec, hf.fr)
		h.Invalid = hf.invalid
		b = mustAppendFrame(t, b, h, payload)
	}
	fs := frames(t, b)
	p, _ := NewPacker(8)
	var out []byte
	for i := range fs {
		out = p.Add(out, &fs[i])
	}
	out = p.Flush(out)
	pkts := decodeMFPs(t, out)
	wantN := []int{3, 1, 1, 2}
	if len(pkts) != len(wantN) {
		t.Fatalf("%d packets, want %d", len(pkts), len(wantN))
	}
	for i, pk := range pkts {
		if pk.N != wantN[i] {
			t.Fatalf("packet %d has %d fragments, want %d", i, pk.N, wantN[i])
		}
	}
	if pkts[3].Flags != schemas.FlagSourceError || pkts[2].Flags != 0 {
		t.Fatal("invalid frames not flagged per packet")
	}
	if p.Frames != uint64(len(fs)) {
		t.Fatalf("%d frames packed of %d", p.Frames, len(fs))
	}
}
