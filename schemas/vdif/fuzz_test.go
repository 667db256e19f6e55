package vdif

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/sluice-daq/sluice/internal/decodetest"
)

// vdifSeeds are small streams made of the real sample headers: two whole
// MWA frames, the first two VLBA headers with their payloads cut to 32 bytes
// (whole 5 KB frames make the fuzzer slow to minimize), and a header of
// each other EDV.
func vdifSeeds(f *testing.F) [][]byte {
	out := [][]byte{sample(f, "sample_mwa.vdif")[:2*544]}
	var vlba []byte
	for _, fr := range frames(f, sample(f, "sample.vdif")[:2*5032]) {
		vlba = mustAppendFrame(f, vlba, fr.Header, fr.Payload()[:32])
	}
	h := edv0Header(2, 86400+19801, 0)
	h.SetALMA(ALMA{Pol: 1, PSN: 99})
	a := mustAppendFrame(f, nil, h, make([]byte, 16))
	h.SetMark5B(Mark5BHeader{JDay: 1, SecondsOfDay: 19801})
	m := mustAppendFrame(f, nil, h, make([]byte, Mark5BPayloadSize))
	h = edv0Header(0, 0, 0)
	h.Legacy = true
	l := mustAppendFrame(f, nil, h, make([]byte, 8))
	return append(out, vlba, a, m[:64], l)
}

// FuzzDecodeHeader: any header DecodeHeader accepts re-encodes to the
// same bytes; anything else is a DecodeError inside the input.
func FuzzDecodeHeader(f *testing.F) {
	for _, s := range vdifSeeds(f) {
		f.Add(s[:min(len(s), HeaderSize)])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHeader(b)
		if err != nil {
			decodetest.Check(t, err, len(b))
			return
		}
		enc, err := AppendHeader(nil, &h)
		if err != nil || !bytes.Equal(enc, b[:h.Size()]) {
			t.Fatalf("re-encoded % x, want % x (%v)", enc, b[:h.Size()], err)
		}
		h.SampleRate()
		h.VLBA()
		h.ALMA()
		if _, ok := h.Mark5B(); h.EDV == EDVMark5B && !h.Legacy && !ok {
			t.Fatal("accepted EDV 0xAB header without a valid Mark 5B header")
		}
		h.Time(int(h.FrameNumber) + 1)
		h.SamplesPerFrame()
		h.Station()
	})
}

// FuzzReader: the stream reader returns whole frames that tile the input,
// then io.EOF or a DecodeError inside the input.
func FuzzReader(f *testing.F) {
	for _, s := range vdifSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rd := NewReader(bytes.NewReader(b))
		var check ThreadCheck
		var off int64
		for {
			fr, err := rd.Next()
			if errors.Is(err, io.EOF) {
				if off != int64(len(b)) {
					t.Fatalf("EOF at %d of %d bytes", off, len(b))
				}
				return
			}
			if err != nil {
				decodetest.Check(t, err, len(b))
				return
			}
			if fr.Offset != off || !bytes.Equal(fr.Bytes, b[off:off+int64(len(fr.Bytes))]) {
				t.Fatalf("frame at %d does not match the input", off)
			}
			off += int64(len(fr.Bytes))
			if err := check.Add(&fr); err != nil {
				decodetest.Check(t, err, len(b))
			}
			FrameFragment(&fr)
		}
	})
}

// FuzzDecodeVTP: a datagram decodes to its sequence number and a frame
// that fills it, or to a DecodeError inside it.
func FuzzDecodeVTP(f *testing.F) {
	for _, s := range vdifSeeds(f) {
		if fr, err := DecodeFrame(s); err == nil {
			f.Add(AppendVTP(nil, 42, fr.Bytes))
		}
	}
	f.Fuzz(func(t *testing.T, d []byte) {
		seq, fr, err := DecodeVTP(d)
		if err != nil {
			decodetest.Check(t, err, len(d))
			return
		}
		if seq != binary.LittleEndian.Uint64(d) || len(fr.Bytes)+VTPHeaderSize != len(d) {
			t.Fatalf("seq %d, frame of %d bytes in a %d-byte datagram", seq, len(fr.Bytes), len(d))
		}
	})
}

// FuzzMark5B: accepted headers re-encode to the same 16 bytes; the frame
// reader and Inspect never panic and report errors inside the input.
func FuzzMark5B(f *testing.F) {
	m := sample(f, "sample.m5b")
	f.Add(m[:Mark5BFrameSize+Mark5BHeaderSize])
	f.Add(m[:Mark5BHeaderSize])
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeMark5BHeader(b)
		if err != nil {
			decodetest.Check(t, err, len(b))
		} else {
			enc, err := AppendMark5BHeader(nil, h)
			if err != nil || !bytes.Equal(enc, b[:Mark5BHeaderSize]) {
				t.Fatalf("re-encoded % x, want % x (%v)", enc, b[:Mark5BHeaderSize], err)
			}
			h.Time(56000, 0)
		}
		rd := NewMark5BReader(bytes.NewReader(b))
		for {
			_, err := rd.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				decodetest.Check(t, err, len(b))
				break
			}
		}
	})
}

// FuzzInspect: detection and inspection of arbitrary bytes never panic.
func FuzzInspect(f *testing.F) {
	for _, s := range vdifSeeds(f) {
		f.Add(s)
	}
	f.Add(sample(f, "sample.m5b"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, err := Inspect(bytes.NewReader(b), 4)
		if err != nil {
			decodetest.Check(t, err, len(b))
		}
		if rep != nil && rep.Bytes > int64(len(b)) {
			t.Fatalf("report counts %d bytes of %d", rep.Bytes, len(b))
		}
	})
}
