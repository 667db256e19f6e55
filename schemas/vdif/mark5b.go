package vdif

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/internal/crc16"
)

// Mark 5B frame layout (mhvk/baseband baseband/mark5b/header.py; Mark 5B
// user's manual): a 16-byte header of four little-endian words followed by a
// fixed 10000-byte payload.
const (
	Mark5BSync         uint32 = 0xABADDEED
	Mark5BHeaderSize          = 16
	Mark5BPayloadSize         = 10000
	Mark5BFrameSize           = Mark5BHeaderSize + Mark5BPayloadSize
	mark5bMaxFrameNr          = 1<<15 - 1
	mark5bFractionUnit        = 100 * time.Microsecond // BCD fraction digit weight
)

const formatMark5B = "mark5b"

// Mark5BHeader is a decoded Mark 5B frame header. Fields:
//
//	w0       sync 0xABADDEED
//	w1 31:16 User, 15 TVG (internal test-vector generator), 14:0 FrameNumber
//	w2 31:20 BCD JDay (MJD mod 1000), 19:0 BCD SecondsOfDay
//	w3 31:16 BCD Fraction (units of 0.1 ms), 15:0 CRC16 of the time code
type Mark5BHeader struct {
	User         uint16
	TVG          bool
	FrameNumber  uint16 // 0..32767, frame within the second
	JDay         uint16 // MJD modulo 1000, 0..999
	SecondsOfDay uint32 // 0..99999 as BCD allows; 0..86399 in valid data
	Fraction     uint16 // fractional second in units of 0.1 ms, truncated, 0..9999
	CRC          uint16 // as stored; DecodeMark5BHeader has checked it
}

// mark5bCRC is CRC-16 with polynomial 0x18005 (x^16+x^15+x^2+1), initial
// value 0, no reflection, no final xor, over the 48 time-code bits
// (BCD JDay, seconds, fraction) taken most significant bit first — the bit
// order baseband's crc16 uses; verified against every frame of sample.m5b.
func mark5bCRC(w2 uint32, frac uint16) uint16 {
	b := [6]byte{byte(w2 >> 24), byte(w2 >> 16), byte(w2 >> 8), byte(w2), byte(frac >> 8), byte(frac)}
	return crc16.Update(0, crc16Table, b[:])
}

// crc16Table is the MSB-first table of the polynomial 0x8005.
var crc16Table = crc16.MakeTable(0x8005)

// bcdDecode returns the value of the n low BCD digits of v, or ok=false if
// a digit is above 9.
func bcdDecode(v uint32, n int) (uint32, bool) {
	var out, scale uint32 = 0, 1
	for range n {
		d := v & 0xf
		if d > 9 {
			return 0, false
		}
		out += d * scale
		scale *= 10
		v >>= 4
	}
	return out, true
}

func bcdEncode(v uint32, n int) uint32 {
	var out uint32
	for i := range n {
		out |= (v % 10) << (4 * i)
		v /= 10
	}
	return out
}

// DecodeMark5BHeader decodes the 16-byte Mark 5B header at the start of b,
// checking the sync word, the BCD digits and the CRC16 of the time code.
// Errors (*schemas.DecodeError, offsets from the start of b): ErrTruncated,
// ErrBadMagic (sync, offset 0), ErrBadHeader (a BCD digit above 9, offset 8
// or 12), ErrCRCMismatch (offset 12).
func DecodeMark5BHeader(b []byte) (Mark5BHeader, error) {
	return decodeMark5BWords(b, formatMark5B)
}

// decodeMark5BWords is shared with VDIF EDV 0xAB, whose words 4..7 are a
// Mark 5B header; format names the outer format in errors.
func decodeMark5BWords(b []byte, format string) (Mark5BHeader, error) {
	if len(b) < Mark5BHeaderSize {
		return Mark5BHeader{}, schemas.Errorf(format, "mark5b header", 0, schemas.ErrTruncated, "need %d bytes, have %d", Mark5BHeaderSize, len(b))
	}
	le := binary.LittleEndian
	if s := le.Uint32(b); s != Mark5BSync {
		return Mark5BHeader{}, schemas.Errorf(format, "mark5b sync", 0, schemas.ErrBadMagic, "want 0x%08x, have 0x%08x", Mark5BSync, s)
	}
	w1, w2, w3 := le.Uint32(b[4:]), le.Uint32(b[8:]), le.Uint32(b[12:])
	jday, ok1 := bcdDecode(w2>>20, 3)
	secs, ok2 := bcdDecode(w2&0xfffff, 5)
	if !ok1 || !ok2 {
		return Mark5BHeader{}, schemas.Errorf(format, "mark5b time code", 8, schemas.ErrBadHeader, "word 2 0x%08x is not BCD", w2)
	}
	frac, ok := bcdDecode(w3>>16, 4)
	if !ok {
		return Mark5BHeader{}, schemas.Errorf(format, "mark5b fraction", 12, schemas.ErrBadHeader, "word 3 bits 31:16 0x%04x is not BCD", w3>>16)
	}
	h := Mark5BHeader{
		User:         uint16(w1 >> 16),
		TVG:          w1&(1<<15) != 0,
		FrameNumber:  uint16(w1 & mark5bMaxFrameNr),
		JDay:         uint16(jday),
		SecondsOfDay: secs,
		Fraction:     uint16(frac),
		CRC:          uint16(w3),
	}
	if c := mark5bCRC(w2, uint16(w3>>16)); c != h.CRC {
		return Mark5BHeader{}, schemas.Errorf(format, "mark5b crc", 12, schemas.ErrCRCMismatch, "time code CRC16 is 0x%04x, header holds 0x%04x", c, h.CRC)
	}
	return h, nil
}

// AppendMark5BHeader appends h's 16-byte encoding to dst with the CRC16
// computed over the time code (h.CRC is ignored). Errors wrap
// schemas.ErrBadHeader for a field out of range.
func AppendMark5BHeader(dst []byte, h Mark5BHeader) ([]byte, error) {
	switch {
	case h.FrameNumber > mark5bMaxFrameNr:
		return dst, fmt.Errorf("mark5b: frame number %d above %d: %w", h.FrameNumber, mark5bMaxFrameNr, schemas.ErrBadHeader)
	case h.JDay > 999 || h.SecondsOfDay > 99999 || h.Fraction > 9999:
		return dst, fmt.Errorf("mark5b: time code %03d/%d/%d out of BCD range: %w", h.JDay, h.SecondsOfDay, h.Fraction, schemas.ErrBadHeader)
	}
	w1 := uint32(h.User)<<16 | uint32(h.FrameNumber)
	if h.TVG {
		w1 |= 1 << 15
	}
	w2 := bcdEncode(uint32(h.JDay), 3)<<20 | bcdEncode(h.SecondsOfDay, 5)
	frac := uint16(bcdEncode(uint32(h.Fraction), 4))
	w3 := uint32(frac)<<16 | uint32(mark5bCRC(w2, frac))
	le := binary.LittleEndian
	dst = le.AppendUint32(dst, Mark5BSync)
	dst = le.AppendUint32(dst, w1)
	dst = le.AppendUint32(dst, w2)
	return le.AppendUint32(dst, w3), nil
}

// Time returns the UTC start of the frame. The header holds only MJD modulo
// 1000, so kday (the thousands of the MJD, e.g. 56000) must come from
// elsewhere (see InferKDay). With framesPerSecond > 0 the fraction of the
// second is FrameNumber/framesPerSecond (exact); otherwise it comes from the
// 0.1 ms BCD fraction "unrounded" up to a multiple of 156.25 µs as
// baseband and mark5access do, which is exact for total bit rates up to
// 512 Mbit/s. Frame 0 always starts on the second.
func (h *Mark5BHeader) Time(kday, framesPerSecond int) time.Time {
	day := mjdTime(kday + int(h.JDay))
	t := day.Add(time.Duration(h.SecondsOfDay) * time.Second)
	switch {
	case h.FrameNumber == 0:
		return t
	case framesPerSecond > 0:
		return t.Add(time.Duration(uint64(h.FrameNumber) * uint64(time.Second) / uint64(framesPerSecond)))
	}
	const step = 156250 // ns: one 80000-bit frame at 512 Mbit/s
	ns := int64(h.Fraction) * int64(mark5bFractionUnit)
	return t.Add(time.Duration((ns + step - 1) / step * step))
}

// InferKDay returns the thousands of MJD that put MJD-modulo-1000 jday
// closest to ref (within 500 days), as baseband's infer_kday does.
func InferKDay(jday int, ref time.Time) int {
	refMJD := int(ref.Sub(mjdTime(0)).Hours() / 24)
	k := (refMJD - jday + 500) / 1000 * 1000
	return k
}

// mjdTime returns the UTC midnight starting Modified Julian Day mjd
// (MJD 0 = 1858-11-17).
func mjdTime(mjd int) time.Time {
	return time.Date(1858, time.November, 17+mjd, 0, 0, 0, 0, time.UTC)
}

// Mark5BFrame is one Mark 5B frame read from a stream.
type Mark5BFrame struct {
	Header Mark5BHeader
	Offset int64  // byte offset of the frame in the stream
	Bytes  []byte // the whole 10016-byte frame, header included
}

// Mark5BReader reads consecutive Mark 5B frames from a stream. It stops at
// the first error; offsets in errors are from the start of the stream.
type Mark5BReader struct {
	r   io.Reader
	off int64
	buf []byte
	err error
}

// NewMark5BReader returns a reader of the Mark 5B frames in r.
func NewMark5BReader(r io.Reader) *Mark5BReader {
	return &Mark5BReader{r: r, buf: make([]byte, Mark5BFrameSize)}
}

// Next returns the next frame; its Bytes are valid until the following
// call. At a clean end of stream it returns io.EOF. A frame cut short gives
// ErrTruncated at the frame's offset; a bad header the errors of
// DecodeMark5BHeader, moved to the frame's offset.
func (r *Mark5BReader) Next() (Mark5BFrame, error) {
	if r.err != nil {
		return Mark5BFrame{}, r.err
	}
	n, err := io.ReadFull(r.r, r.buf)
	switch {
	case err == io.EOF:
		r.err = io.EOF
	case err == io.ErrUnexpectedEOF:
		r.err = schemas.Errorf(formatMark5B, "frame", r.off, schemas.ErrTruncated, "need %d bytes, stream ends after %d", Mark5BFrameSize, n)
	case err != nil:
		r.err = fmt.Errorf("mark5b: read at byte offset %d: %w", r.off+int64(n), err)
	}
	if r.err != nil {
		return Mark5BFrame{}, r.err
	}
	h, err := DecodeMark5BHeader(r.buf)
	if err != nil {
		r.err = schemas.WithOffset(err, r.off)
		return Mark5BFrame{}, r.err
	}
	f := Mark5BFrame{Header: h, Offset: r.off, Bytes: r.buf}
	r.off += Mark5BFrameSize
	return f, nil
}
