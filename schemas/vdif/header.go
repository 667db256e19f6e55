package vdif

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/sluice-daq/sluice/schemas"
)

// VDIF header sizes and the sync words of the extended data versions.
const (
	LegacyHeaderSize = 16 // words 0..3 (legacy bit set)
	HeaderSize       = 32 // words 0..7
	// SampleRateSync is word 5 of EDV 1, 3 and 4 headers.
	SampleRateSync uint32 = 0xACABFEED
	// ALMASync is word 4 bits 23:4 of EDV 2 (ALMA / R2DBE) headers.
	ALMASync uint32 = 0xA5EA5
	// Mark5BFrameLength is the frame length (8-byte units) of EDV 0xAB
	// frames: a 32-byte header and a 10000-byte Mark 5B payload.
	Mark5BFrameLength = (HeaderSize + Mark5BPayloadSize) / 8
)

// Extended data versions with a layout this package knows.
const (
	EDVNone       uint8 = 0x00 // words 4..7 zero
	EDVSampleRate uint8 = 0x01 // sample rate + sync; words 6..7 DAS id
	EDVALMA       uint8 = 0x02 // ALMA / R2DBE
	EDVVLBA       uint8 = 0x03 // sample rate + sync + VLBA fields
	EDVMulti      uint8 = 0x04 // sample rate + sync; words 6..7 validity mask
	EDVMark5B     uint8 = 0xAB // words 4..7 are a Mark 5B header
)

const formatVDIF = "vdif"

// Header is a decoded VDIF frame header (VDIF specification release 1.1.1;
// bit positions as in mhvk/baseband baseband/vdif/header.py and DiFX
// vdifio.h). Words are little-endian uint32; see the package doc for the
// table. Extended user data are kept raw in User so that every header,
// whatever its EDV, re-encodes byte for byte; the typed views
// (SampleRate, VLBA, ALMA, Mark5B) decode them.
type Header struct {
	Invalid       bool   // w0 bit 31: the frame's data are invalid
	Legacy        bool   // w0 bit 30: 16-byte header without words 4..7
	Seconds       uint32 // w0 bits 29:0: seconds since the reference epoch
	Unassigned    uint8  // w1 bits 31:30: 0 by the spec; kept for byte-exact re-encoding
	RefEpoch      uint8  // w1 bits 29:24: half-years since 2000-01-01
	FrameNumber   uint32 // w1 bits 23:0: frame within the second, from 0
	Version       uint8  // w2 bits 31:29
	Log2Channels  uint8  // w2 bits 28:24
	FrameLength   uint32 // w2 bits 23:0: frame length in 8-byte units, header included
	Complex       bool   // w3 bit 31
	BitsPerSample uint8  // w3 bits 30:26 plus one: 1..32 (per component if complex)
	ThreadID      uint16 // w3 bits 25:16: 0..1023
	StationID     uint16 // w3 bits 15:0: two ASCII characters or a number
	EDV           uint8  // w4 bits 31:24: extended data version (0 for legacy)
	// User holds the extended user data: w4 bits 23:0 in User[0], then w5,
	// w6, w7. All zero for legacy headers.
	User [4]uint32
}

// Size is the header size in bytes: 16 for legacy headers, else 32.
func (h *Header) Size() int {
	if h.Legacy {
		return LegacyHeaderSize
	}
	return HeaderSize
}

// FrameBytes is the frame size in bytes, header included.
func (h *Header) FrameBytes() int { return int(h.FrameLength) * 8 }

// PayloadBytes is the payload size in bytes.
func (h *Header) PayloadBytes() int { return h.FrameBytes() - h.Size() }

// Channels is the number of channels in the frame.
func (h *Header) Channels() int { return 1 << h.Log2Channels }

// SamplesPerFrame is the number of complete samples (one value per
// channel) in the payload. Values never straddle a 32-bit word, as in
// baseband: a word holds 32/bits values (half as many when complex). 0 for
// a header without bits per sample (never one that DecodeHeader returned).
func (h *Header) SamplesPerFrame() int {
	if h.BitsPerSample == 0 {
		return 0
	}
	perWord := 32 / int(h.BitsPerSample)
	if h.Complex {
		perWord /= 2
	}
	return h.PayloadBytes() / 4 * perWord / h.Channels()
}

// Station returns the station id as its two ASCII characters when the first
// is printable (baseband's rule), else as a decimal number.
func (h *Header) Station() string {
	if hi := h.StationID >> 8; hi >= 48 && hi < 128 {
		lo := byte(h.StationID)
		if lo >= 32 && lo < 127 {
			return string([]byte{byte(hi), lo})
		}
	}
	return strconv.Itoa(int(h.StationID))
}

// DecodeHeader decodes the VDIF header at the start of b (16 bytes for a
// legacy header, else 32) and checks it: the frame length must cover the
// header; EDV 0 must have zero extended words; EDV 1, 3, 4 must carry the
// 0xACABFEED sync in word 5; EDV 2 the 0xA5EA5 sync in word 4; EDV 0xAB a
// valid Mark 5B header in words 4..7 (sync, BCD, CRC) whose frame number and
// time of day agree with words 0..1, and a frame length of 1254. Other EDVs
// are accepted with their words kept raw. The payload is not read.
//
// Errors (*schemas.DecodeError, offsets from the start of b):
// ErrTruncated (0), ErrBadHeader (frame_length, 8), ErrInconsistent (EDV 0
// words, EDV 0xAB fields), ErrBadMagic (sync words, 16 or 20),
// ErrCRCMismatch (EDV 0xAB time code, 28).
func DecodeHeader(b []byte) (Header, error) {
	h, err := decodeFields(b)
	if err != nil || h.Legacy {
		return h, err
	}
	if err := h.checkEDV(b); err != nil {
		return Header{}, err
	}
	return h, nil
}

// decodeFields is DecodeHeader without the checks of the EDV's extended
// words.
func decodeFields(b []byte) (Header, error) {
	le := binary.LittleEndian
	if len(b) < LegacyHeaderSize {
		return Header{}, schemas.Errorf(formatVDIF, "header", 0, schemas.ErrTruncated, "need %d bytes, have %d", LegacyHeaderSize, len(b))
	}
	w0, w1, w2, w3 := le.Uint32(b), le.Uint32(b[4:]), le.Uint32(b[8:]), le.Uint32(b[12:])
	h := Header{
		Invalid:       w0>>31 != 0,
		Legacy:        w0>>30&1 != 0,
		Seconds:       w0 & (1<<30 - 1),
		Unassigned:    uint8(w1 >> 30),
		RefEpoch:      uint8(w1 >> 24 & 0x3f),
		FrameNumber:   w1 & 0xffffff,
		Version:       uint8(w2 >> 29),
		Log2Channels:  uint8(w2 >> 24 & 0x1f),
		FrameLength:   w2 & 0xffffff,
		Complex:       w3>>31 != 0,
		BitsPerSample: uint8(w3>>26&0x1f) + 1,
		ThreadID:      uint16(w3 >> 16 & 0x3ff),
		StationID:     uint16(w3),
	}
	if !h.Legacy {
		if len(b) < HeaderSize {
			return Header{}, schemas.Errorf(formatVDIF, "header", 0, schemas.ErrTruncated, "need %d bytes for a non-legacy header, have %d", HeaderSize, len(b))
		}
		w4 := le.Uint32(b[16:])
		h.EDV = uint8(w4 >> 24)
		h.User = [4]uint32{w4 & 0xffffff, le.Uint32(b[20:]), le.Uint32(b[24:]), le.Uint32(b[28:])}
	}
	if h.FrameBytes() < h.Size() {
		return Header{}, schemas.Errorf(formatVDIF, "frame_length", 8, schemas.ErrBadHeader, "frame length %d bytes is smaller than the %d-byte header", h.FrameBytes(), h.Size())
	}
	return h, nil
}

// checkEDV checks the extended words of a non-legacy header b against the
// layout of its EDV.
func (h *Header) checkEDV(b []byte) error {
	switch h.EDV {
	case EDVNone:
		for i, w := range h.User {
			if w != 0 {
				return schemas.Errorf(formatVDIF, fmt.Sprintf("word %d", 4+i), int64(16+4*i), schemas.ErrInconsistent, "EDV 0 requires extended user data 0, have 0x%08x", w)
			}
		}
	case EDVSampleRate, EDVVLBA, EDVMulti:
		if h.User[1] != SampleRateSync {
			return schemas.Errorf(formatVDIF, "sync", 20, schemas.ErrBadMagic, "EDV %d: want 0x%08x, have 0x%08x", h.EDV, SampleRateSync, h.User[1])
		}
	case EDVALMA:
		if s := h.User[0] >> 4; s != ALMASync {
			return schemas.Errorf(formatVDIF, "sync", 16, schemas.ErrBadMagic, "EDV 2: want word 4 bits 23:4 = 0x%05x, have 0x%05x", ALMASync, s)
		}
	case EDVMark5B:
		m, err := decodeMark5BWords(b[16:HeaderSize], formatVDIF)
		if err != nil {
			return schemas.WithOffset(err, 16)
		}
		switch {
		case h.FrameLength != Mark5BFrameLength:
			return schemas.Errorf(formatVDIF, "frame_length", 8, schemas.ErrInconsistent, "EDV 0xAB frames are %d units of 8 bytes, have %d", Mark5BFrameLength, h.FrameLength)
		case uint32(m.FrameNumber) != h.FrameNumber:
			return schemas.Errorf(formatVDIF, "mark5b frame number", 20, schemas.ErrInconsistent, "Mark 5B frame %d, VDIF frame %d", m.FrameNumber, h.FrameNumber)
		case m.SecondsOfDay != h.Seconds%86400:
			return schemas.Errorf(formatVDIF, "mark5b time code", 24, schemas.ErrInconsistent, "Mark 5B second of day %d, VDIF second of day %d", m.SecondsOfDay, h.Seconds%86400)
		}
	}
	return nil
}

// AppendHeader appends h's encoding (16 or 32 bytes) to dst. Errors wrap
// schemas.ErrBadHeader when a field does not fit its bits or the frame
// length does not cover the header.
func AppendHeader(dst []byte, h *Header) ([]byte, error) {
	bad := func(field string, v, max uint64) ([]byte, error) {
		return dst, fmt.Errorf("vdif: %s %d exceeds %d: %w", field, v, max, schemas.ErrBadHeader)
	}
	switch {
	case h.Seconds >= 1<<30:
		return bad("seconds", uint64(h.Seconds), 1<<30-1)
	case h.Unassigned >= 4:
		return bad("unassigned bits", uint64(h.Unassigned), 3)
	case h.RefEpoch >= 64:
		return bad("reference epoch", uint64(h.RefEpoch), 63)
	case h.FrameNumber >= 1<<24:
		return bad("frame number", uint64(h.FrameNumber), 1<<24-1)
	case h.Version >= 8:
		return bad("version", uint64(h.Version), 7)
	case h.Log2Channels >= 32:
		return bad("log2 channels", uint64(h.Log2Channels), 31)
	case h.FrameLength >= 1<<24:
		return bad("frame length", uint64(h.FrameLength), 1<<24-1)
	case h.BitsPerSample == 0 || h.BitsPerSample > 32:
		return bad("bits per sample", uint64(h.BitsPerSample), 32)
	case h.ThreadID >= 1024:
		return bad("thread id", uint64(h.ThreadID), 1023)
	case h.User[0] >= 1<<24:
		return bad("word 4 user data", uint64(h.User[0]), 1<<24-1)
	case h.FrameBytes() < h.Size():
		return dst, fmt.Errorf("vdif: frame length %d bytes is smaller than the %d-byte header: %w", h.FrameBytes(), h.Size(), schemas.ErrBadHeader)
	}
	w0 := h.Seconds
	if h.Invalid {
		w0 |= 1 << 31
	}
	if h.Legacy {
		w0 |= 1 << 30
	}
	w3 := uint32(h.BitsPerSample-1)<<26 | uint32(h.ThreadID)<<16 | uint32(h.StationID)
	if h.Complex {
		w3 |= 1 << 31
	}
	le := binary.LittleEndian
	dst = le.AppendUint32(dst, w0)
	dst = le.AppendUint32(dst, uint32(h.Unassigned)<<30|uint32(h.RefEpoch)<<24|h.FrameNumber)
	dst = le.AppendUint32(dst, uint32(h.Version)<<29|uint32(h.Log2Channels)<<24|h.FrameLength)
	dst = le.AppendUint32(dst, w3)
	if h.Legacy {
		return dst, nil
	}
	dst = le.AppendUint32(dst, uint32(h.EDV)<<24|h.User[0])
	for _, w := range h.User[1:] {
		dst = le.AppendUint32(dst, w)
	}
	return dst, nil
}
