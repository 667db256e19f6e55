package vdif

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-daq/sluice/schemas"
)

// SampleRate is the sample-rate field of EDV 1, 3 and 4 headers: word 4
// bit 23 is the unit (1 = MHz, 0 = kHz), bits 22:0 the rate.
type SampleRate struct {
	MHz  bool
	Rate uint32 // 0..2^23-1, in MHz or kHz
}

// SamplesPerSecond is the number of complete samples per second per
// channel. As in baseband (correct for EDV 3), the field is the complex
// sample rate, or half the rate of real samples.
func (s SampleRate) SamplesPerSecond(complex bool) uint64 {
	r := uint64(s.Rate) * 1000
	if s.MHz {
		r *= 1000
	}
	if !complex {
		r *= 2
	}
	return r
}

// SampleRate returns the sample-rate field of an EDV 1, 3 or 4 header, and
// false for other headers.
func (h *Header) SampleRate() (SampleRate, bool) {
	if h.Legacy || (h.EDV != EDVSampleRate && h.EDV != EDVVLBA && h.EDV != EDVMulti) {
		return SampleRate{}, false
	}
	return SampleRate{MHz: h.User[0]>>23 != 0, Rate: h.User[0] & (1<<23 - 1)}, true
}

// SetSampleRate makes h an EDV 1, 3 or 4 header with the given rate and
// the 0xACABFEED sync; words 6..7 are left as they are.
func (h *Header) SetSampleRate(edv uint8, s SampleRate) error {
	if edv != EDVSampleRate && edv != EDVVLBA && edv != EDVMulti {
		return fmt.Errorf("vdif: EDV %d carries no sample rate: %w", edv, schemas.ErrBadHeader)
	}
	if s.Rate >= 1<<23 {
		return fmt.Errorf("vdif: sample rate %d exceeds 23 bits: %w", s.Rate, schemas.ErrBadHeader)
	}
	h.Legacy, h.EDV = false, edv
	h.User[0] = s.Rate
	if s.MHz {
		h.User[0] |= 1 << 23
	}
	h.User[1] = SampleRateSync
	return nil
}

// HeaderFrameRate is the frames per second per thread that the header's
// sample rate implies (EDV 1, 3, 4): samples per second / samples per
// frame. ok is false when the header has no rate or the division is not
// exact.
func (h *Header) HeaderFrameRate() (int, bool) {
	s, ok := h.SampleRate()
	spf := uint64(h.SamplesPerFrame())
	if !ok || s.Rate == 0 || spf == 0 {
		return 0, false
	}
	sps := s.SamplesPerSecond(h.Complex)
	if sps%spf != 0 {
		return 0, false
	}
	return int(sps / spf), true
}

// VLBA holds the EDV 3 (VLBA) fields: word 6 is the LO/IF tuning word;
// word 7 has dbe_unit (27:24), if_nr (23:20), subband (19:17),
// sideband (16), major_rev (15:12), minor_rev (11:8), personality (7:0).
type VLBA struct {
	LOIFTuning  uint32
	DBEUnit     uint8 // 0..15
	IFNumber    uint8 // 0..15
	Subband     uint8 // 0..7
	Sideband    bool  // true: upper sideband
	MajorRev    uint8 // 0..15
	MinorRev    uint8 // 0..15
	Personality uint8
}

// VLBA returns the EDV 3 fields, and false for other headers.
func (h *Header) VLBA() (VLBA, bool) {
	if h.Legacy || h.EDV != EDVVLBA {
		return VLBA{}, false
	}
	w := h.User[3]
	return VLBA{
		LOIFTuning:  h.User[2],
		DBEUnit:     uint8(w >> 24 & 0xf),
		IFNumber:    uint8(w >> 20 & 0xf),
		Subband:     uint8(w >> 17 & 0x7),
		Sideband:    w>>16&1 != 0,
		MajorRev:    uint8(w >> 12 & 0xf),
		MinorRev:    uint8(w >> 8 & 0xf),
		Personality: uint8(w),
	}, true
}

// SetVLBA makes h an EDV 3 header with sample rate s and fields v.
func (h *Header) SetVLBA(s SampleRate, v VLBA) error {
	if v.DBEUnit > 15 || v.IFNumber > 15 || v.Subband > 7 || v.MajorRev > 15 || v.MinorRev > 15 {
		return fmt.Errorf("vdif: VLBA field out of range %+v: %w", v, schemas.ErrBadHeader)
	}
	if err := h.SetSampleRate(EDVVLBA, s); err != nil {
		return err
	}
	w := uint32(v.DBEUnit)<<24 | uint32(v.IFNumber)<<20 | uint32(v.Subband)<<17 |
		uint32(v.MajorRev)<<12 | uint32(v.MinorRev)<<8 | uint32(v.Personality)
	if v.Sideband {
		w |= 1 << 16
	}
	h.User[2], h.User[3] = v.LOIFTuning, w
	return nil
}

// ALMA holds the EDV 2 (ALMA / R2DBE) fields: word 4 bit 0 polarization,
// bits 2:1 baseline quadrant, bit 3 baseline correlator, bits 23:4 the
// 0xA5EA5 sync; word 5 PIC status; words 6..7 the packet serial number
// (word 6 low, as baseband reads it).
type ALMA struct {
	Pol          uint8 // 0..1
	BLQuadrant   uint8 // 0..3
	BLCorrelator uint8 // 0..1
	PICStatus    uint32
	PSN          uint64
}

// ALMA returns the EDV 2 fields, and false for other headers.
func (h *Header) ALMA() (ALMA, bool) {
	if h.Legacy || h.EDV != EDVALMA {
		return ALMA{}, false
	}
	w := h.User[0]
	return ALMA{
		Pol:          uint8(w & 1),
		BLQuadrant:   uint8(w >> 1 & 3),
		BLCorrelator: uint8(w >> 3 & 1),
		PICStatus:    h.User[1],
		PSN:          uint64(h.User[3])<<32 | uint64(h.User[2]),
	}, true
}

// SetALMA makes h an EDV 2 header with fields a and the 0xA5EA5 sync.
func (h *Header) SetALMA(a ALMA) error {
	if a.Pol > 1 || a.BLQuadrant > 3 || a.BLCorrelator > 1 {
		return fmt.Errorf("vdif: ALMA field out of range %+v: %w", a, schemas.ErrBadHeader)
	}
	h.Legacy, h.EDV = false, EDVALMA
	h.User = [4]uint32{
		ALMASync<<4 | uint32(a.BLCorrelator)<<3 | uint32(a.BLQuadrant)<<1 | uint32(a.Pol),
		a.PICStatus, uint32(a.PSN), uint32(a.PSN >> 32),
	}
	return nil
}

// Mark5B returns the Mark 5B header carried in words 4..7 of an EDV 0xAB
// header (already checked by DecodeHeader), and false for other headers.
func (h *Header) Mark5B() (Mark5BHeader, bool) {
	if h.Legacy || h.EDV != EDVMark5B {
		return Mark5BHeader{}, false
	}
	var b [Mark5BHeaderSize]byte
	binary.LittleEndian.PutUint32(b[0:], uint32(EDVMark5B)<<24|h.User[0])
	for i, w := range h.User[1:] {
		binary.LittleEndian.PutUint32(b[4+4*i:], w)
	}
	m, err := DecodeMark5BHeader(b[:])
	return m, err == nil
}

// SetMark5B makes h an EDV 0xAB (Mark 5B over VDIF) header carrying m
// (CRC recomputed), with the frame length of a 10000-byte payload.
func (h *Header) SetMark5B(m Mark5BHeader) error {
	b, err := AppendMark5BHeader(make([]byte, 0, Mark5BHeaderSize), m)
	if err != nil {
		return err
	}
	le := binary.LittleEndian
	h.Legacy, h.EDV, h.FrameLength = false, EDVMark5B, Mark5BFrameLength
	h.User = [4]uint32{le.Uint32(b) & 0xffffff, le.Uint32(b[4:]), le.Uint32(b[8:]), le.Uint32(b[12:])}
	return nil
}
