package cms

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-daq/sluice/schemas"
)

// Phase-2 SlinkRocket framing (DataFormats/FEDRawData/interface/
// SLinkRocketHeaders.h, version 3): a 16-byte header, the payload in 16-byte
// words, a 16-byte trailer; little-endian. Header:
//
//	bytes 0-3 source_id | 4-5 l1a_types | 6 phys_type | 7 emu_status (bits 1:0)
//	bytes 8-15, a u64: event_id bits 43:0 | version bits 55:52 (= 3) | BOE bits 63:56 (= 0x55)
//
// Trailer:
//
//	bytes 0-1 status | 2-3 crc | 4-7 orbit_id
//	bytes 8-11, a u32: bx_id bits 11:0 | event_length bits 31:12 (16-byte words, header and trailer included)
//	bytes 12-15, a u32: daq_crc bits 23:8 | EOE bits 31:24 (= 0xAA)
//
// cmssw does not check either CRC of SlinkRocket fragments (DAQSource's DTH
// model notes that the CRC-16 was never checked and that its word size for
// Phase 2 is still to be confirmed), so neither do we: the fields are read
// and written as given.
const (
	SlinkRocketBOE      = 0x55
	SlinkRocketEOE      = 0xAA
	SlinkRocketVersion  = 3
	SlinkRocketWordSize = 16
	// SlinkRocketMinSize is a fragment without payload: header and trailer.
	SlinkRocketMinSize = 2 * SlinkRocketWordSize
	// maxSlinkRocketWords is the largest event_length the 20-bit field holds.
	maxSlinkRocketWords = 1<<20 - 1
	slrFormat           = "cms-slinkrocket"
)

// SlinkRocketStatus holds the trailer's status bits.
type SlinkRocketStatus uint16

const (
	SlinkRocketFEDCRCError   SlinkRocketStatus = 1 << 0 // the DTH found and corrected a FED CRC error
	SlinkRocketSlinkCRCError SlinkRocketStatus = 1 << 1 // the SLink receiver's CRC did not match daq_crc
	SlinkRocketSourceIDError SlinkRocketStatus = 1 << 2 // unexpected source id
	SlinkRocketSyncLost      SlinkRocketStatus = 1 << 3 // the DTH lost synchronisation
	SlinkRocketFragmentCut   SlinkRocketStatus = 1 << 4 // the fragment was truncated
)

// SlinkRocket is one decoded Phase-2 fragment. Payload aliases the buffer
// it was decoded from.
type SlinkRocket struct {
	SourceID  uint32
	L1ATypes  uint16
	PhysType  uint8
	EmuStatus uint8  // 2 bits
	EventID   uint64 // 44 bits
	Status    SlinkRocketStatus
	CRC       uint16 // as sent by the source; not verified
	OrbitID   uint32
	BXID      uint16 // 12 bits
	DAQCRC    uint16 // as sent by the DAQ link; not verified
	Payload   []byte // a whole number of 16-byte words
}

// AppendSlinkRocket appends f to dst with event_length computed. Errors: a
// payload that is not a whole number of 16-byte words or too long for the
// 20-bit length, or a field wider than its bit field.
func AppendSlinkRocket(dst []byte, f *SlinkRocket) ([]byte, error) {
	if len(f.Payload)%SlinkRocketWordSize != 0 {
		return dst, fmt.Errorf("cms: SlinkRocket source %d payload of %d bytes is not a whole number of 16-byte words", f.SourceID, len(f.Payload))
	}
	words := len(f.Payload)/SlinkRocketWordSize + 2
	if words > maxSlinkRocketWords || f.EventID >= 1<<44 || f.EmuStatus > 3 || f.BXID > 0xFFF {
		return dst, fmt.Errorf("cms: SlinkRocket source %d: a length or field wider than its bit field", f.SourceID)
	}
	le := binary.LittleEndian
	dst = le.AppendUint32(dst, f.SourceID)
	dst = le.AppendUint16(dst, f.L1ATypes)
	dst = append(dst, f.PhysType, f.EmuStatus)
	dst = le.AppendUint64(dst, f.EventID|SlinkRocketVersion<<52|SlinkRocketBOE<<56)
	dst = append(dst, f.Payload...)
	dst = le.AppendUint16(dst, uint16(f.Status))
	dst = le.AppendUint16(dst, f.CRC)
	dst = le.AppendUint32(dst, f.OrbitID)
	dst = le.AppendUint32(dst, uint32(f.BXID)|uint32(words)<<12)
	return le.AppendUint32(dst, uint32(f.DAQCRC)<<8|SlinkRocketEOE<<24), nil
}

// DecodeSlinkRocket decodes b as exactly one SlinkRocket fragment. Payload
// aliases b. Errors: *schemas.DecodeError wrapping ErrTruncated (under 32
// bytes), ErrBadHeader (not whole 16-byte words), ErrBadMagic (BOE or EOE),
// ErrBadVersion or ErrInconsistent (event_length differs from len(b)).
func DecodeSlinkRocket(b []byte) (SlinkRocket, error) {
	if len(b) < SlinkRocketMinSize {
		return SlinkRocket{}, schemas.Errorf(slrFormat, "fragment", 0, schemas.ErrTruncated, "need %d bytes for header and trailer, have %d", SlinkRocketMinSize, len(b))
	}
	if len(b)%SlinkRocketWordSize != 0 {
		return SlinkRocket{}, schemas.Errorf(slrFormat, "fragment", 0, schemas.ErrBadHeader, "%d bytes is not a whole number of 16-byte words", len(b))
	}
	tOff := len(b) - SlinkRocketWordSize
	if n := slrWords(b[tOff:]); n != len(b)/SlinkRocketWordSize {
		return SlinkRocket{}, schemas.Errorf(slrFormat, "trailer.event_length", int64(tOff+8), schemas.ErrInconsistent, "event_length %d words, fragment has %d", n, len(b)/SlinkRocketWordSize)
	}
	return decodeSlinkRocket(b, 0)
}

// slrWords returns event_length of the trailer at the start of t.
func slrWords(t []byte) int { return int(binary.LittleEndian.Uint32(t[8:]) >> 12) }

// decodeSlinkRocket decodes the fragment b (whole words, at least two,
// matching event_length) found at byte offset base of the caller's buffer.
func decodeSlinkRocket(b []byte, base int) (SlinkRocket, error) {
	le := binary.LittleEndian
	tOff := len(b) - SlinkRocketWordSize
	if b[15] != SlinkRocketBOE {
		return SlinkRocket{}, schemas.Errorf(slrFormat, "header.boe", int64(base+15), schemas.ErrBadMagic, "want 0x%02x, have 0x%02x", SlinkRocketBOE, b[15])
	}
	if v := b[14] >> 4; v != SlinkRocketVersion {
		return SlinkRocket{}, schemas.Errorf(slrFormat, "header.version", int64(base+14), schemas.ErrBadVersion, "want %d, have %d", SlinkRocketVersion, v)
	}
	if b[tOff+15] != SlinkRocketEOE {
		return SlinkRocket{}, schemas.Errorf(slrFormat, "trailer.eoe", int64(base+tOff+15), schemas.ErrBadMagic, "want 0x%02x, have 0x%02x", SlinkRocketEOE, b[tOff+15])
	}
	t := b[tOff:]
	return SlinkRocket{
		SourceID:  le.Uint32(b),
		L1ATypes:  le.Uint16(b[4:]),
		PhysType:  b[6],
		EmuStatus: b[7] & 3,
		EventID:   le.Uint64(b[8:]) & (1<<44 - 1),
		Status:    SlinkRocketStatus(le.Uint16(t)),
		CRC:       le.Uint16(t[2:]),
		OrbitID:   le.Uint32(t[4:]),
		BXID:      uint16(le.Uint32(t[8:]) & 0xFFF),
		DAQCRC:    uint16(le.Uint32(t[12:]) >> 8),
		Payload:   b[SlinkRocketWordSize:tOff:tOff],
	}, nil
}

// WalkSlinkRockets walks concatenated SlinkRocket fragments backwards from
// the end of data, as cmssw's DAQSource DTH model does: trailer,
// event_length·16 bytes back to the header. fn receives each fragment with
// its byte offset, last first, and stops the walk by returning false.
// Errors: *schemas.DecodeError wrapping ErrBadHeader (data not whole
// 16-byte words), ErrTruncated, ErrBadMagic, ErrBadVersion or
// ErrSizeOverflow (an event_length under 2 words or reaching before the
// start of data), at the offending word.
func WalkSlinkRockets(data []byte, fn func(off int, f SlinkRocket) bool) error {
	if len(data)%SlinkRocketWordSize != 0 {
		return schemas.Errorf(slrFormat, "data", 0, schemas.ErrBadHeader, "%d bytes is not a whole number of 16-byte words", len(data))
	}
	// Invariant: data[:end] holds the fragments not visited yet.
	for end := len(data); end > 0; {
		if end < SlinkRocketMinSize {
			return schemas.Errorf(slrFormat, "data", 0, schemas.ErrTruncated, "%d bytes left before the first fragment, need at least %d", end, SlinkRocketMinSize)
		}
		tOff := end - SlinkRocketWordSize
		if data[tOff+15] != SlinkRocketEOE {
			return schemas.Errorf(slrFormat, "trailer.eoe", int64(tOff+15), schemas.ErrBadMagic, "want 0x%02x, have 0x%02x", SlinkRocketEOE, data[tOff+15])
		}
		n := slrWords(data[tOff:]) * SlinkRocketWordSize
		if n < SlinkRocketMinSize || n > end {
			return schemas.Errorf(slrFormat, "trailer.event_length", int64(tOff+8), schemas.ErrSizeOverflow, "event_length %d bytes, %d bytes available before the trailer's end", n, end)
		}
		start := end - n
		f, err := decodeSlinkRocket(data[start:end:end], start)
		if err != nil {
			return err
		}
		if !fn(start, f) {
			return nil
		}
		end = start
	}
	return nil
}
