package lhcb

import (
	"encoding/binary"

	"github.com/sluice-daq/sluice/schemas"
)

// ODINVersion is the ODIN bank version DecodeODIN reads.
const (
	ODINVersion = 6
	// ODINPayloadSize is the version 6 payload: ten 32-bit words.
	ODINPayloadSize = 40

	formatODIN = "odin"
)

// ODIN is the decoded ODIN bank (type 16), which carries the identity of an
// LHCb event. Layout of version 6 (ten little-endian 32-bit words, LHCb
// Event/ODIN.h): w0 run; w1 event type (bits 0–15) and calibration step
// (16–31); w2 orbit; w3, w4 event number high and low 32 bits; w5, w6 GPS
// time high and low (µs since the Unix epoch); w7 detector status (bits
// 0–23) and error bits (24–31); w8 bunch id (0–11), TAE window (12–14),
// trigger type (16–18), calibration type (19–20), force bit (21),
// bunch-crossing type (22–23), bunch current (24–31); w9 TCK.
type ODIN struct {
	Run             uint32
	EventType       uint16
	CalibrationStep uint16
	Orbit           uint32
	EventNumber     uint64
	GPSTime         uint64 // µs
	DetectorStatus  uint32 // 24 bits
	ErrorBits       uint8
	BunchID         uint16 // 12 bits
	TAEWindow       uint8
	TriggerType     uint8
	CalibrationType uint8
	Force           bool
	BXType          uint8 // 0 no beam, 1 beam 1, 2 beam 2, 3 crossing
	BunchCurrent    uint8
	TCK             uint32
}

// DecodeODIN decodes the payload of an ODIN bank of the given version.
// Errors: *schemas.DecodeError (offsets from the start of payload) wrapping
// ErrBadVersion (not version 6) or ErrTruncated (payload under 40 bytes).
func DecodeODIN(version uint8, payload []byte) (ODIN, error) {
	if version != ODINVersion {
		return ODIN{}, schemas.Errorf(formatODIN, "version", 0, schemas.ErrBadVersion, "bank version %d, know %d", version, ODINVersion)
	}
	if len(payload) < ODINPayloadSize {
		return ODIN{}, schemas.Errorf(formatODIN, "payload", 0, schemas.ErrTruncated, "need %d bytes, have %d", ODINPayloadSize, len(payload))
	}
	w := func(i int) uint32 { return binary.LittleEndian.Uint32(payload[4*i:]) }
	w7, w8 := w(7), w(8)
	return ODIN{
		Run:             w(0),
		EventType:       uint16(w(1)),
		CalibrationStep: uint16(w(1) >> 16),
		Orbit:           w(2),
		EventNumber:     uint64(w(3))<<32 | uint64(w(4)),
		GPSTime:         uint64(w(5))<<32 | uint64(w(6)),
		DetectorStatus:  w7 & 0xFFFFFF,
		ErrorBits:       uint8(w7 >> 24),
		BunchID:         uint16(w8 & 0xFFF),
		TAEWindow:       uint8(w8>>12) & 7,
		TriggerType:     uint8(w8>>16) & 7,
		CalibrationType: uint8(w8>>19) & 3,
		Force:           w8>>21&1 == 1,
		BXType:          uint8(w8>>22) & 3,
		BunchCurrent:    uint8(w8 >> 24),
		TCK:             w(9),
	}, nil
}

// AppendODIN appends the 40-byte version 6 payload of o to dst (fields are
// truncated to their bit widths).
func AppendODIN(dst []byte, o *ODIN) []byte {
	le := binary.LittleEndian
	b2i := func(b bool) uint32 {
		if b {
			return 1
		}
		return 0
	}
	w8 := uint32(o.BunchID&0xFFF) | uint32(o.TAEWindow&7)<<12 | uint32(o.TriggerType&7)<<16 |
		uint32(o.CalibrationType&3)<<19 | b2i(o.Force)<<21 | uint32(o.BXType&3)<<22 | uint32(o.BunchCurrent)<<24
	for _, v := range [10]uint32{
		o.Run, uint32(o.EventType) | uint32(o.CalibrationStep)<<16, o.Orbit,
		uint32(o.EventNumber >> 32), uint32(o.EventNumber), uint32(o.GPSTime >> 32), uint32(o.GPSTime),
		o.DetectorStatus&0xFFFFFF | uint32(o.ErrorBits)<<24, w8, o.TCK,
	} {
		dst = le.AppendUint32(dst, v)
	}
	return dst
}
