package lhcb

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/sluice-daq/sluice/internal/decodetest"
	"github.com/sluice-daq/sluice/schemas"
)

func TestReaderSample(t *testing.T) {
	data := readFile(t, mdfSample)
	r := NewReader(bytes.NewReader(data))
	n := 0
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Offset != sampleRecordOffsets[n] {
			t.Errorf("record %d at offset %d, want %d", n, rec.Offset, sampleRecordOffsets[n])
		}
		h := rec.Header
		if h.Version != 3 || h.SubheaderWords != 7 || h.DataType != DataTypeBanks || h.Compressed() {
			t.Errorf("record %d: version %d, subheader %d words, data type %d, compression %#x", n, h.Version, h.SubheaderWords, h.DataType, h.Compression)
		}
		if h.Run != sampleRun || h.Orbit != 0 || h.Bunch != 0 || h.TriggerMask != [4]uint32{^uint32(0), ^uint32(0), ^uint32(0), ^uint32(0)} {
			t.Errorf("record %d: run %d orbit %d bunch %d mask %x", n, h.Run, h.Orbit, h.Bunch, h.TriggerMask)
		}
		if rec.Checksum != ChecksumValid || h.Checksum == 0 {
			t.Errorf("record %d: checksum %#x %v", n, h.Checksum, rec.Checksum)
		}
		if len(rec.Body) != int(h.Size)-48 {
			t.Errorf("record %d: body %d bytes for size %d", n, len(rec.Body), h.Size)
		}
		n++
	}
	if n != sampleRecords || r.Offset() != int64(len(data)) {
		t.Fatalf("read %d records ending at %d, want %d ending at %d", n, r.Offset(), sampleRecords, len(data))
	}
}

// TestChecksumSigned pins the signed-char arithmetic: the first sample
// record's stored checksum is reproduced, and an unsigned variant of the
// hash does not reproduce it.
func TestChecksumSigned(t *testing.T) {
	data := readFile(t, mdfSample)
	size := binary.LittleEndian.Uint32(data)
	stored := binary.LittleEndian.Uint32(data[12:])
	if got := Checksum(data[16:size]); got != stored {
		t.Fatalf("Checksum = %#08x, stored %#08x", got, stored)
	}
	var h uint32
	for _, c := range data[16:size] {
		h += uint32(c)
		h += h << 10
		h ^= h >> 6
	}
	h += h << 3
	h ^= h >> 11
	h += h << 15
	if h == stored {
		t.Fatal("unsigned-byte hash also matches; the test cannot tell the two apart")
	}
	// One byte 0xFF is -1 as a signed char: the hash starts from 0xFFFFFFFF
	// (an unsigned byte would start it from 0xFF).
	x := uint32(0xFFFFFFFF)
	x += x << 10
	x ^= x >> 6
	x += x << 3
	x ^= x >> 11
	x += x << 15
	if got := Checksum([]byte{0xFF}); got != x {
		t.Fatalf("Checksum(ff) = %#x, want %#x", got, x)
	}
}

func TestDecodeRecordZeroCopy(t *testing.T) {
	data := readFile(t, mdfSample)
	rec, n, err := DecodeRecord(data)
	if err != nil {
		t.Fatal(err)
	}
	if n != int(sampleRecordOffsets[1]) || &rec.Body[0] != &data[48] {
		t.Fatalf("n = %d; body aliases the input: %v", n, &rec.Body[0] == &data[48])
	}
}

// TestRecordRoundTripVersions writes and reads back every header version,
// compressed and not.
func TestRecordRoundTripVersions(t *testing.T) {
	body, err := AppendBank(nil, Bank{Type: 9, Version: 3, SourceID: 1000, Data: []byte("abcdefg")})
	if err != nil {
		t.Fatal(err)
	}
	body = append(body, bytes.Repeat(body, 500)...)
	for _, h := range []Header{
		{Version: 0, EventType: 7, TriggerNumber: 0xAB_1234_5678, TriggerMask: [4]uint32{1, 2, 3, 4}},
		{Version: 1, TriggerMask: [4]uint32{5, 6, 7, 8}, Run: 11, Orbit: 12, Bunch: 13},
		{Version: 2, DataType: 1, Spare: 9},
		{Version: 3, DataType: DataTypeBanks, TriggerMask: [4]uint32{9, 10, 11, 12}, Run: 21, Orbit: 22, Bunch: 23},
	} {
		for _, level := range []int{0, 1, 9} {
			var buf bytes.Buffer
			w := NewWriter(&buf)
			w.Level = level
			if err := w.Write(h, body); err != nil {
				t.Fatal(err)
			}
			if err := w.Write(h, body[:12]); err != nil {
				t.Fatal(err)
			}
			r := NewReader(&buf)
			for k, want := range [][]byte{body, body[:12]} {
				rec, err := r.Next()
				if err != nil {
					t.Fatalf("v%d level %d record %d: %v", h.Version, level, k, err)
				}
				got := rec.Header
				if rec.Checksum != ChecksumValid || !bytes.Equal(rec.Body, want) || got.Compressed() != (level > 0) {
					t.Fatalf("v%d level %d: checksum %v, body equal %v, compression %#x", h.Version, level, rec.Checksum, bytes.Equal(rec.Body, want), got.Compression)
				}
				if level > 0 && got.Compression&0xF != uint8(level) {
					t.Fatalf("compression byte %#x, want level %d in the low nibble", got.Compression, level)
				}
				got.Size, got.Checksum, got.Compression, got.SubheaderWords = 0, 0, 0, 0
				if got != h {
					t.Fatalf("header %+v, want %+v", got, h)
				}
			}
			if _, err := r.Next(); !errors.Is(err, io.EOF) {
				t.Fatalf("after the records: %v, want io.EOF", err)
			}
		}
	}
}

// record builds a valid v3 record around body for the error tests.
func record(t *testing.T, body []byte, level int) []byte {
	t.Helper()
	b, err := AppendRecord(nil, Header{Version: 3, DataType: DataTypeBanks, Run: 5}, body, level)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReaderErrors(t *testing.T) {
	data := readFile(t, mdfSample)
	second := sampleRecordOffsets[1]
	t.Run("truncated body", func(t *testing.T) {
		r := NewReader(bytes.NewReader(data[:second+1000]))
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		_, err := r.Next()
		decodetest.Want(t, err, schemas.ErrTruncated, second+48)
		if _, err2 := r.Next(); err2 != err {
			t.Fatalf("reading on after truncation: %v", err2)
		}
	})
	t.Run("truncated header", func(t *testing.T) {
		_, err := NewReader(bytes.NewReader(data[:second+10])).skip(1)
		decodetest.Want(t, err, schemas.ErrTruncated, second)
	})
	t.Run("truncated subheader", func(t *testing.T) {
		_, err := NewReader(bytes.NewReader(data[:second+30])).skip(1)
		decodetest.Want(t, err, schemas.ErrTruncated, second+20)
	})
	t.Run("bad checksum", func(t *testing.T) {
		bad := bytes.Clone(data)
		bad[second+5000] ^= 0x40
		r := NewReader(bytes.NewReader(bad))
		_, err := r.skip(1)
		decodetest.Want(t, err, schemas.ErrCRCMismatch, second+12)
		// The record was read whole: the reader goes on with the next one.
		rec, err := r.Next()
		if err != nil || rec.Offset != sampleRecordOffsets[2] {
			t.Fatalf("after a checksum error: %v", err)
		}
		r = NewReader(bytes.NewReader(bad))
		r.Checksums = ChecksumReport
		rec, err = r.skip(1)
		if err != nil || rec.Checksum != ChecksumBad {
			t.Fatalf("ChecksumReport: %v, %v", err, rec.Checksum)
		}
	})
	t.Run("size words disagree", func(t *testing.T) {
		bad := bytes.Clone(data)
		binary.LittleEndian.PutUint32(bad[second+8:], 1234)
		_, err := NewReader(bytes.NewReader(bad)).skip(1)
		decodetest.Want(t, err, schemas.ErrInconsistent, second+8)
	})
	t.Run("size overflow", func(t *testing.T) {
		bad := bytes.Clone(data[:48])
		for i := 0; i < 12; i += 4 {
			binary.LittleEndian.PutUint32(bad[i:], 0xFFFFFFF0)
		}
		_, err := NewReader(bytes.NewReader(bad)).Next()
		decodetest.Want(t, err, schemas.ErrSizeOverflow, 0)
	})
	t.Run("size below header", func(t *testing.T) {
		bad := bytes.Clone(data[:48])
		for i := 0; i < 12; i += 4 {
			binary.LittleEndian.PutUint32(bad[i:], 40)
		}
		_, err := NewReader(bytes.NewReader(bad)).Next()
		decodetest.Want(t, err, schemas.ErrBadHeader, 0)
	})
	t.Run("huge size on a short stream", func(t *testing.T) {
		bad := bytes.Clone(data[:4096])
		for i := 0; i < 12; i += 4 {
			binary.LittleEndian.PutUint32(bad[i:], MaxRecordSize)
		}
		_, err := NewReader(bytes.NewReader(bad)).Next()
		de := decodetest.Want(t, err, schemas.ErrTruncated, 48)
		if de.Field != "body" {
			t.Fatalf("field %q", de.Field)
		}
	})
	t.Run("unknown version", func(t *testing.T) {
		bad := bytes.Clone(data)
		bad[second+17] = 0x47
		_, err := NewReader(bytes.NewReader(bad)).skip(1)
		decodetest.Want(t, err, schemas.ErrBadVersion, second+17)
	})
	t.Run("subheader length disagrees with version", func(t *testing.T) {
		bad := bytes.Clone(data)
		bad[17] = 0x36
		_, err := NewReader(bytes.NewReader(bad)).Next()
		decodetest.Want(t, err, schemas.ErrInconsistent, 17)
	})
	t.Run("unknown data type", func(t *testing.T) {
		bad := bytes.Clone(data)
		bad[18] = 7
		_, err := NewReader(bytes.NewReader(bad)).Next()
		decodetest.Want(t, err, schemas.ErrUnsupported, 18)
	})
}

func TestCompressionErrors(t *testing.T) {
	body, _ := AppendBank(nil, Bank{Type: 1, Data: bytes.Repeat([]byte("lhcb"), 1000)})
	good := record(t, body, 6)
	if good[48] != 'Z' || good[49] != 'L' || good[50] != 8 {
		t.Fatalf("block header % x, want ZL 08", good[48:57])
	}
	if len(good) >= 48+len(body) {
		t.Fatalf("compressed record of %d bytes for a %d-byte body", len(good), len(body))
	}
	rechecksum := func(b []byte) []byte {
		binary.LittleEndian.PutUint32(b[12:], Checksum(b[16:]))
		return b
	}
	for _, tc := range []struct {
		name     string
		edit     func(b []byte) []byte
		sentinel error
		off      int64
	}{
		{"lz4", func(b []byte) []byte { b[48], b[49] = 'L', '4'; return b }, schemas.ErrUnsupported, 48},
		{"zstd", func(b []byte) []byte { b[48], b[49] = 'Z', 'S'; return b }, schemas.ErrUnsupported, 48},
		{"lzma", func(b []byte) []byte { b[48], b[49] = 'X', 'Z'; return b }, schemas.ErrUnsupported, 48},
		{"garbage tag", func(b []byte) []byte { b[48], b[49] = 0, 1; return b }, schemas.ErrBadMagic, 48},
		{"zlib method", func(b []byte) []byte { b[50] = 9; return b }, schemas.ErrUnsupported, 50},
		{"uncompressed size lies", func(b []byte) []byte { b[54]++; return b }, schemas.ErrInconsistent, 48},
		{"compressed size past the body", func(b []byte) []byte { b[53] = 0x7F; return b }, schemas.ErrTruncated, 51},
		{"adler32", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, schemas.ErrCRCMismatch, 48},
		{"short block header", func(b []byte) []byte {
			b = append(b, 'Z', 'L')
			for i := 0; i < 12; i += 4 {
				binary.LittleEndian.PutUint32(b[i:], uint32(len(b)))
			}
			return b
		}, schemas.ErrTruncated, int64(len(good))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := rechecksum(tc.edit(bytes.Clone(good)))
			_, _, err := DecodeRecord(b)
			de := decodetest.Want(t, err, tc.sentinel, tc.off)
			if tc.sentinel == schemas.ErrUnsupported && tc.name != "zlib method" && !bytes.Contains([]byte(de.Detail), b[48:50]) {
				t.Fatalf("detail %q does not name the algorithm tag %q", de.Detail, b[48:50])
			}
		})
	}
}

// skip reads n records and returns the next one.
func (r *Reader) skip(n int) (*Record, error) {
	for i := 0; i < n; i++ {
		if _, err := r.Next(); err != nil {
			return nil, err
		}
	}
	return r.Next()
}

// TestReaderReset: a reset Reader reads a new stream from offset 0 and
// forgets a sticky error.
func TestReaderReset(t *testing.T) {
	data := readFile(t, mdfSample)
	r := NewReader(bytes.NewReader(data[:100]))
	r.Checksums = ChecksumSkip
	if _, err := r.Next(); !errors.Is(err, schemas.ErrTruncated) {
		t.Fatalf("short stream: %v", err)
	}
	r.Reset(bytes.NewReader(data))
	rec, err := r.Next()
	if err != nil || rec.Offset != 0 || rec.Checksum != ChecksumNotChecked || r.Offset() != sampleRecordOffsets[1] {
		t.Fatalf("after Reset: %v, offset %d, checksum %v", err, r.Offset(), rec.Checksum)
	}
}
