package vdif

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/schemas"
)

func readMark5B(b []byte) ([]Mark5BFrame, error) {
	rd := NewMark5BReader(bytes.NewReader(b))
	var out []Mark5BFrame
	for {
		f, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, f)
	}
}

func TestMark5BSample(t *testing.T) {
	b := sample(t, "sample.m5b")
	fs, err := readMark5B(b)
	if err != nil || len(fs) != 4 {
		t.Fatalf("%d frames, %v", len(fs), err)
	}
	fractions := []uint16{0, 1, 3, 4}
	crcs := []uint16{0x975d, 0x1758, 0x9757, 0x1746}
	start := time.Date(2014, 6, 13, 5, 30, 1, 0, time.UTC)
	for i, f := range fs {
		h := f.Header
		want := Mark5BHeader{User: 0xbead, FrameNumber: uint16(i), JDay: 821, SecondsOfDay: 19801, Fraction: fractions[i], CRC: crcs[i]}
		if h != want || f.Offset != int64(i*Mark5BFrameSize) {
			t.Fatalf("frame %d at %d: %+v, want %+v", i, f.Offset, h, want)
		}
		// 6400 frames/s: frame i starts i*156.25 µs after the second; the
		// truncated 0.1 ms fraction "unrounds" to the same instant.
		wantT := start.Add(time.Duration(i) * 156250 * time.Nanosecond)
		if got := h.Time(56000, 6400); !got.Equal(wantT) {
			t.Fatalf("frame %d time %v, want %v", i, got, wantT)
		}
		if got := h.Time(56000, 0); !got.Equal(wantT) {
			t.Fatalf("frame %d time from fraction %v, want %v", i, got, wantT)
		}
		enc, err := AppendMark5BHeader(nil, h)
		if err != nil || !bytes.Equal(enc, b[f.Offset:f.Offset+16]) {
			t.Fatalf("frame %d re-encoded % x (%v)", i, enc, err)
		}
	}
	if k := InferKDay(821, time.Date(2014, 1, 1, 0, 0, 0, 0, time.UTC)); k != 56000 {
		t.Fatalf("kday %d, want 56000", k)
	}
	if k := InferKDay(10, time.Date(2014, 6, 13, 0, 0, 0, 0, time.UTC)); k != 57000 {
		t.Fatalf("kday for jday 010 near MJD 56821: %d, want 57000", k)
	}
}

func TestMark5BCRCCheckValue(t *testing.T) {
	// CRC-16/UMTS (poly 0x8005, init 0, unreflected) of "123456789" is
	// 0xFEE8; feed the same register the 48-bit time code path uses.
	var crc uint16
	for _, x := range []byte("123456789") {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^x]
	}
	if crc != 0xfee8 {
		t.Fatalf("check value 0x%04x, want 0xfee8", crc)
	}
}

func TestMark5BErrors(t *testing.T) {
	b := sample(t, "sample.m5b")
	le := binary.LittleEndian
	mod := func(f func(c []byte)) []byte {
		c := bytes.Clone(b)
		f(c)
		return c
	}
	for _, tc := range []struct {
		name     string
		b        []byte
		good     int
		sentinel error
		off      int64
	}{
		{"truncated frame", b[:len(b)-1], 3, schemas.ErrTruncated, 30048},
		{"bad sync", mod(func(c []byte) { c[10016] = 0 }), 1, schemas.ErrBadMagic, 10016},
		{"bad CRC", mod(func(c []byte) { c[20032+12] ^= 1 }), 2, schemas.ErrCRCMismatch, 20032 + 12},
		// Fraction 0003 -> 0002: still BCD, so only the CRC can tell.
		{"time code changed", mod(func(c []byte) { c[20032+14] = 0x02 }), 2, schemas.ErrCRCMismatch, 20032 + 12},
		{"seconds not BCD", mod(func(c []byte) { le.PutUint32(c[8:], 0x8211980a) }), 0, schemas.ErrBadHeader, 8},
		{"fraction not BCD", mod(func(c []byte) { c[10016+14] = 0x0c }), 1, schemas.ErrBadHeader, 10016 + 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, err := readMark5B(tc.b)
			if len(fs) != tc.good {
				t.Fatalf("%d good frames, want %d", len(fs), tc.good)
			}
			wantDecodeError(t, err, "mark5b", tc.sentinel, tc.off)
		})
	}
	_, err := DecodeMark5BHeader(b[:15])
	wantDecodeError(t, err, "mark5b", schemas.ErrTruncated, 0)
	if _, err := AppendMark5BHeader(nil, Mark5BHeader{FrameNumber: 1 << 15}); !errors.Is(err, schemas.ErrBadHeader) {
		t.Fatalf("frame number 32768: %v", err)
	}
	if _, err := AppendMark5BHeader(nil, Mark5BHeader{JDay: 1000}); !errors.Is(err, schemas.ErrBadHeader) {
		t.Fatalf("jday 1000: %v", err)
	}
}

// TestMark5BOverVDIF wraps each sample Mark 5B frame in an EDV 0xAB VDIF
// frame and reads it back.
func TestMark5BOverVDIF(t *testing.T) {
	fs, err := readMark5B(sample(t, "sample.m5b"))
	if err != nil {
		t.Fatal(err)
	}
	var stream []byte
	epoch := uint8(28) // 2014-01-01: MJD 56658
	day := uint32(56821 - 56658)
	for _, f := range fs {
		h := Header{Seconds: day*86400 + f.Header.SecondsOfDay, RefEpoch: epoch, FrameNumber: uint32(f.Header.FrameNumber), BitsPerSample: 2, Log2Channels: 3}
		if err := h.SetMark5B(f.Header); err != nil {
			t.Fatal(err)
		}
		stream = mustAppendFrame(t, stream, h, f.Bytes[Mark5BHeaderSize:])
	}
	got, err := readAll(stream)
	if err != nil || len(got) != 4 {
		t.Fatalf("%d frames, %v", len(got), err)
	}
	for i, g := range got {
		m, ok := g.Header.Mark5B()
		if !ok || m != fs[i].Header || len(g.Bytes) != 10032 || !bytes.Equal(g.Payload(), fs[i].Bytes[16:]) {
			t.Fatalf("frame %d: %+v", i, m)
		}
		vt, _ := g.Header.Time(6400)
		if mt := m.Time(56000, 6400); !vt.Equal(mt) {
			t.Fatalf("frame %d: VDIF time %v, Mark 5B time %v", i, vt, mt)
		}
	}
}
