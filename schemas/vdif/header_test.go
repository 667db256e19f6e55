package vdif

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/schemas"
)

func TestDecodeSampleVLBA(t *testing.T) {
	fs := frames(t, sample(t, "sample.vdif"))
	if len(fs) != 16 {
		t.Fatalf("%d frames, want 16", len(fs))
	}
	h := fs[0].Header
	want := Header{Seconds: 14363767, RefEpoch: 28, Version: 1, FrameLength: 629, BitsPerSample: 2,
		ThreadID: 1, StationID: 0xfffc, EDV: 3, User: [4]uint32{0x800010, SampleRateSync, 0x33400000, 0xf2031583}}
	if h != want {
		t.Fatalf("header\n%+v, want\n%+v", h, want)
	}
	if h.Size() != 32 || h.FrameBytes() != 5032 || h.PayloadBytes() != 5000 || h.Channels() != 1 || h.SamplesPerFrame() != 20000 {
		t.Fatalf("sizes %d %d %d %d %d", h.Size(), h.FrameBytes(), h.PayloadBytes(), h.Channels(), h.SamplesPerFrame())
	}
	sr, ok := h.SampleRate()
	if !ok || sr != (SampleRate{MHz: true, Rate: 16}) || sr.SamplesPerSecond(false) != 32_000_000 {
		t.Fatalf("sample rate %+v %v", sr, ok)
	}
	if fps, ok := h.HeaderFrameRate(); !ok || fps != 1600 {
		t.Fatalf("frame rate %d %v, want 1600", fps, ok)
	}
	v, ok := h.VLBA()
	wantV := VLBA{LOIFTuning: 0x33400000, DBEUnit: 2, IFNumber: 0, Subband: 1, Sideband: true, MajorRev: 1, MinorRev: 5, Personality: 0x83}
	if !ok || v != wantV {
		t.Fatalf("VLBA %+v, want %+v", v, wantV)
	}
	if h.Station() != "65532" {
		t.Fatalf("station %q", h.Station())
	}
	threads := []uint16{1, 3, 5, 7, 0, 2, 4, 6}
	for i, f := range fs {
		if f.Header.ThreadID != threads[i%8] || f.Header.FrameNumber != uint32(i/8) {
			t.Fatalf("frame %d: thread %d frame %d", i, f.Header.ThreadID, f.Header.FrameNumber)
		}
	}
	t0, err := h.Time(1600)
	if err != nil || !t0.Equal(time.Date(2014, 6, 16, 5, 56, 7, 0, time.UTC)) {
		t.Fatalf("time %v %v", t0, err)
	}
	t1, err := fs[8].Header.Time(1600)
	if err != nil || t1.Sub(t0) != 625*time.Microsecond {
		t.Fatalf("frame 1 time %v %v", t1, err)
	}
	if _, err := fs[8].Header.Time(0); err == nil {
		t.Fatal("frame 1 without a frame rate: want an error")
	}
	if _, err := fs[8].Header.Time(1); err == nil {
		t.Fatal("frame number 1 at 1 frame/s: want an error")
	}
}

func TestDecodeSampleMWA(t *testing.T) {
	fs := frames(t, sample(t, "sample_mwa.vdif"))
	if len(fs) != 10 {
		t.Fatalf("%d frames, want 10", len(fs))
	}
	h := fs[0].Header
	if h.EDV != 0 || h.Legacy || !h.Complex || h.BitsPerSample != 8 || h.Channels() != 2 || h.FrameBytes() != 544 ||
		h.Station() != "mw" || h.RefEpoch != 31 || h.Version != 0 || h.SamplesPerFrame() != 128 {
		t.Fatalf("header %+v", h)
	}
	if _, ok := h.SampleRate(); ok {
		t.Fatal("EDV 0 has no sample rate")
	}
	if ts, _ := h.Time(0); !ts.Equal(time.Date(2015, 10, 3, 20, 49, 45, 0, time.UTC)) {
		t.Fatalf("time %v", ts)
	}
	for i, f := range fs {
		if f.Header.FrameNumber != uint32(i) {
			t.Fatalf("frame %d has number %d", i, f.Header.FrameNumber)
		}
	}
}

func TestEpochTime(t *testing.T) {
	for e, want := range map[uint8]time.Time{
		0:  time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		1:  time.Date(2000, 7, 1, 0, 0, 0, 0, time.UTC),
		28: time.Date(2014, 1, 1, 0, 0, 0, 0, time.UTC),
		63: time.Date(2031, 7, 1, 0, 0, 0, 0, time.UTC),
	} {
		if got := EpochTime(e); !got.Equal(want) {
			t.Errorf("epoch %d: %v, want %v", e, got, want)
		}
	}
}

// TestHeaderRoundTrip re-encodes every sample header and headers of each
// EDV built with the setters, and checks the bytes and fields come back.
func TestHeaderRoundTrip(t *testing.T) {
	var hdrs []Header
	for _, name := range []string{"sample.vdif", "sample_mwa.vdif"} {
		for _, f := range frames(t, sample(t, name)) {
			enc, err := AppendHeader(nil, &f.Header)
			if err != nil || !bytes.Equal(enc, f.Bytes[:HeaderSize]) {
				t.Fatalf("%s at %d: re-encoded % x, want % x (%v)", name, f.Offset, enc, f.Bytes[:HeaderSize], err)
			}
		}
	}
	base := Header{Invalid: true, Seconds: 1<<30 - 1, RefEpoch: 63, FrameNumber: 1<<24 - 1, Version: 7, Log2Channels: 31,
		FrameLength: 1<<24 - 1, Complex: true, BitsPerSample: 32, ThreadID: 1023, StationID: 0xffff}
	legacy := base
	legacy.Legacy = true
	hdrs = append(hdrs, base, legacy)
	s1 := base
	if err := s1.SetSampleRate(EDVSampleRate, SampleRate{Rate: 1<<23 - 1}); err != nil {
		t.Fatal(err)
	}
	s4 := base
	if err := s4.SetSampleRate(EDVMulti, SampleRate{MHz: true, Rate: 64}); err != nil {
		t.Fatal(err)
	}
	s3 := base
	wantV := VLBA{LOIFTuning: 0xdeadbeef, DBEUnit: 15, IFNumber: 9, Subband: 7, Sideband: true, MajorRev: 3, MinorRev: 4, Personality: 0xff}
	if err := s3.SetVLBA(SampleRate{MHz: true, Rate: 32}, wantV); err != nil {
		t.Fatal(err)
	}
	al := base
	wantA := ALMA{Pol: 1, BLQuadrant: 2, BLCorrelator: 1, PICStatus: 0x12345678, PSN: 0x0102030405060708}
	if err := al.SetALMA(wantA); err != nil {
		t.Fatal(err)
	}
	mk := base
	mk.Seconds, mk.FrameNumber = 86400*3+19801, 7
	wantM := Mark5BHeader{User: 0xbead, TVG: true, FrameNumber: 7, JDay: 821, SecondsOfDay: 19801, Fraction: 10}
	if err := mk.SetMark5B(wantM); err != nil {
		t.Fatal(err)
	}
	hdrs = append(hdrs, s1, s4, s3, al, mk)
	for _, h := range hdrs {
		enc, err := AppendHeader(nil, &h)
		if err != nil {
			t.Fatalf("%+v: %v", h, err)
		}
		if len(enc) != h.Size() {
			t.Fatalf("EDV %d legacy %v: %d bytes", h.EDV, h.Legacy, len(enc))
		}
		got, err := DecodeHeader(enc)
		if err != nil || got != h {
			t.Fatalf("decoded\n%+v, want\n%+v (%v)", got, h, err)
		}
	}
	if v, ok := s3.VLBA(); !ok || v != wantV {
		t.Fatalf("VLBA %+v", v)
	}
	if a, ok := al.ALMA(); !ok || a != wantA {
		t.Fatalf("ALMA %+v", a)
	}
	m, ok := mk.Mark5B()
	wantM.CRC = m.CRC
	if !ok || m != wantM {
		t.Fatalf("Mark 5B %+v, want %+v", m, wantM)
	}
	if mk.FrameLength != 1254 || mk.User[0] != 0xADDEED {
		t.Fatalf("EDV 0xAB frame length %d word 4 %#x", mk.FrameLength, mk.User[0])
	}
}

func TestAppendHeaderRange(t *testing.T) {
	ok := edv0Header(0, 0, 0)
	ok.FrameLength = 4
	for name, mod := range map[string]func(*Header){
		"seconds":    func(h *Header) { h.Seconds = 1 << 30 },
		"epoch":      func(h *Header) { h.RefEpoch = 64 },
		"frame":      func(h *Header) { h.FrameNumber = 1 << 24 },
		"bits 0":     func(h *Header) { h.BitsPerSample = 0 },
		"bits 33":    func(h *Header) { h.BitsPerSample = 33 },
		"thread":     func(h *Header) { h.ThreadID = 1024 },
		"version":    func(h *Header) { h.Version = 8 },
		"length":     func(h *Header) { h.FrameLength = 3 },
		"word 4":     func(h *Header) { h.User[0] = 1 << 24 },
		"unassigned": func(h *Header) { h.Unassigned = 4 },
	} {
		h := ok
		mod(&h)
		if _, err := AppendHeader(nil, &h); !errors.Is(err, schemas.ErrBadHeader) {
			t.Errorf("%s: error %v, want ErrBadHeader", name, err)
		}
	}
	if _, err := AppendHeader(nil, &ok); err != nil {
		t.Fatal(err)
	}
	if _, err := AppendFrame(nil, ok, make([]byte, 12)); !errors.Is(err, schemas.ErrBadHeader) {
		t.Errorf("payload not a multiple of 8: %v", err)
	}
	h := ok
	if err := h.SetSampleRate(EDVALMA, SampleRate{}); err == nil {
		t.Error("SetSampleRate(EDV 2): want an error")
	}
	if err := h.SetALMA(ALMA{Pol: 2}); err == nil {
		t.Error("SetALMA(pol 2): want an error")
	}
	if err := h.SetVLBA(SampleRate{}, VLBA{Subband: 8}); err == nil {
		t.Error("SetVLBA(subband 8): want an error")
	}
}

// TestDecodeHeaderErrors gives each malformed header its exact error.
func TestDecodeHeaderErrors(t *testing.T) {
	vlba := sample(t, "sample.vdif")[:HeaderSize]
	mk := edv0Header(0, 86400+19801, 3)
	if err := mk.SetMark5B(Mark5BHeader{FrameNumber: 3, JDay: 821, SecondsOfDay: 19801, Fraction: 3}); err != nil {
		t.Fatal(err)
	}
	mark5b, _ := AppendHeader(nil, &mk)
	alma := edv0Header(0, 0, 0)
	alma.FrameLength = 629
	alma.SetALMA(ALMA{})
	almaB, _ := AppendHeader(nil, &alma)
	le := binary.LittleEndian
	mod := func(b []byte, f func(b []byte)) []byte {
		c := bytes.Clone(b)
		f(c)
		return c
	}
	for _, tc := range []struct {
		name     string
		b        []byte
		sentinel error
		off      int64
	}{
		{"15 bytes", vlba[:15], schemas.ErrTruncated, 0},
		{"non-legacy 16 bytes", vlba[:16], schemas.ErrTruncated, 0},
		{"frame length 0", mod(vlba, func(b []byte) { le.PutUint32(b[8:], 0x20000000) }), schemas.ErrBadHeader, 8},
		{"frame length 24 B < 32 B header", mod(vlba, func(b []byte) { le.PutUint32(b[8:], 0x20000003) }), schemas.ErrBadHeader, 8},
		{"legacy frame length 8 B", mod(vlba[:16], func(b []byte) { b[3] |= 0x40; le.PutUint32(b[8:], 1) }), schemas.ErrBadHeader, 8},
		{"EDV 0 word 6 set", mod(vlba, func(b []byte) { le.PutUint32(b[16:], 0); le.PutUint32(b[20:], 0); le.PutUint32(b[28:], 0) }), schemas.ErrInconsistent, 24},
		{"EDV 0 word 4 set", mod(vlba, func(b []byte) { le.PutUint32(b[16:], 5) }), schemas.ErrInconsistent, 16},
		{"EDV 3 sync", mod(vlba, func(b []byte) { b[20] ^= 1 }), schemas.ErrBadMagic, 20},
		{"EDV 1 sync", mod(vlba, func(b []byte) { b[19] = 1; b[23] = 0 }), schemas.ErrBadMagic, 20},
		{"EDV 2 sync", mod(almaB, func(b []byte) { b[17] ^= 0x10 }), schemas.ErrBadMagic, 16},
		{"EDV 0xAB Mark 5B sync", mod(mark5b, func(b []byte) { b[16] ^= 1 }), schemas.ErrBadMagic, 16},
		{"EDV 0xAB CRC", mod(mark5b, func(b []byte) { b[28] ^= 1 }), schemas.ErrCRCMismatch, 28},
		{"EDV 0xAB BCD", mod(mark5b, func(b []byte) { b[24] |= 0x0f }), schemas.ErrBadHeader, 24},
		{"EDV 0xAB frame number", mod(mark5b, func(b []byte) { b[4] = 4 }), schemas.ErrInconsistent, 20},
		{"EDV 0xAB second of day", mod(mark5b, func(b []byte) { b[0]++ }), schemas.ErrInconsistent, 24},
		{"EDV 0xAB frame length", mod(mark5b, func(b []byte) { b[8]++ }), schemas.ErrInconsistent, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeHeader(tc.b)
			wantDecodeError(t, err, "vdif", tc.sentinel, tc.off)
		})
	}
	if _, err := DecodeHeader(mark5b); err != nil {
		t.Fatalf("valid EDV 0xAB header: %v", err)
	}
}

func TestHeaderZeroValue(t *testing.T) {
	var h Header
	if h.SamplesPerFrame() != 0 || h.Station() != "0" {
		t.Fatalf("zero header: %d samples, station %q", h.SamplesPerFrame(), h.Station())
	}
	if _, ok := h.HeaderFrameRate(); ok {
		t.Fatal("zero header has no frame rate")
	}
	h.BitsPerSample, h.FrameLength = 2, 8
	if err := h.SetSampleRate(EDVSampleRate, SampleRate{Rate: 3}); err != nil {
		t.Fatal(err)
	}
	// 6000 samples/s over 64 samples per frame is not a whole frame rate.
	if fps, ok := h.HeaderFrameRate(); ok {
		t.Fatalf("frame rate %d from a non-integral ratio", fps)
	}
}
