package cms

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-daq/sluice/schemas"
)

// FED fragment framing constants (DataFormats/FEDRawData/src/fed_header.h,
// fed_trailer.h).
const (
	FEDHeaderMarker  = 0x5 // BOE_1, bits 63:60 of the header word
	FEDTrailerMarker = 0xA // EOE_1, bits 63:60 of the trailer word
	// FEDWordSize is the framing unit: fragments are whole 64-bit words.
	FEDWordSize = 8
	// FEDMinSize is an empty fragment: one header and one trailer word.
	FEDMinSize = 2 * FEDWordSize
	// MaxFEDID is the largest FED id the 12-bit Source_id field holds.
	MaxFEDID = 0xFFF
	// maxFEDWords is the largest Evt_lgth the 24-bit field holds.
	maxFEDWords = 1<<24 - 1
)

const fedFormat = "cms-fed"

// FED is one decoded FED fragment. Payload aliases the buffer it was decoded
// from and holds the words between the header and the trailer word
// (including any further header words announced by MoreHeaders).
type FED struct {
	SourceID    uint16 // FED id, 12 bits
	EventType   uint8  // Evt_ty, 4 bits
	LV1ID       uint32 // level-1 accept counter, 24 bits
	BXID        uint16 // bunch crossing, 12 bits
	FOV         uint8  // format version, 4 bits
	MoreHeaders bool   // H: another header word follows the first

	EvtStat      uint8  // Evt_stat, 4 bits
	TTS          uint8  // TTS state, 4 bits
	MoreTrailers bool   // T
	WrongFEDID   bool   // R: the FRL saw a FED id other than expected
	SlinkError   bool   // F: the SLINK reported a transmission error
	CRCModified  bool   // C: the FRL or SLINK modified the CRC
	CRC          uint16 // CRC-16 as stored in the trailer

	Payload []byte
	raw     []byte // the whole fragment, header to trailer
}

// Size is the fragment's size in bytes, header and trailer included.
func (f *FED) Size() int { return len(f.Payload) + FEDMinSize }

// Bytes returns the encoded fragment the FED was decoded from, or nil for a
// FED built by hand (encode it with AppendFED).
func (f *FED) Bytes() []byte { return f.raw }

// CRCValid reports whether the stored CRC-16 matches the fragment's bytes.
// A FED built by hand (not decoded) has no bytes and reports false.
func (f *FED) CRCValid() bool { return f.raw != nil && FEDCRC(f.raw) == f.CRC }

// AppendFED appends f as a FED fragment to dst, with Evt_lgth and the
// CRC-16 computed (f.CRC is ignored). Errors (caller bugs, returned rather
// than panicking because the fields come from user input in tools): a
// payload that is not a whole number of 64-bit words or too long for the
// 24-bit length, or a field wider than its bit field.
func AppendFED(dst []byte, f *FED) ([]byte, error) {
	if len(f.Payload)%FEDWordSize != 0 {
		return dst, fmt.Errorf("cms: FED %d payload of %d bytes is not a whole number of 64-bit words", f.SourceID, len(f.Payload))
	}
	words := len(f.Payload)/FEDWordSize + 2
	switch {
	case words > maxFEDWords:
		return dst, fmt.Errorf("cms: FED %d of %d words exceeds the 24-bit Evt_lgth", f.SourceID, words)
	case f.SourceID > MaxFEDID, f.BXID > 0xFFF, f.LV1ID > 0xFFFFFF,
		f.EventType > 0xF, f.FOV > 0xF, f.EvtStat > 0xF, f.TTS > 0xF:
		return dst, fmt.Errorf("cms: FED %d has a header or trailer field wider than its bit field", f.SourceID)
	}
	h := uint64(FEDHeaderMarker)<<60 | uint64(f.EventType)<<56 | uint64(f.LV1ID)<<32 |
		uint64(f.BXID)<<20 | uint64(f.SourceID)<<8 | uint64(f.FOV)<<4 | bit(f.MoreHeaders, 3)
	t := uint64(FEDTrailerMarker)<<60 | uint64(words)<<32 | bit(f.WrongFEDID, 15) | bit(f.SlinkError, 14) |
		uint64(f.EvtStat)<<8 | uint64(f.TTS)<<4 | bit(f.MoreTrailers, 3) | bit(f.CRCModified, 2)
	start := len(dst)
	dst = binary.LittleEndian.AppendUint64(dst, h)
	dst = append(dst, f.Payload...)
	dst = binary.LittleEndian.AppendUint64(dst, t)
	crc := FEDCRC(dst[start:])
	binary.LittleEndian.PutUint16(dst[len(dst)-6:], crc) // bits 31:16 = bytes 2-3 of the trailer
	return dst, nil
}

func bit(b bool, n uint) uint64 {
	if b {
		return 1 << n
	}
	return 0
}

// DecodeFED decodes b as exactly one FED fragment (header word first,
// trailer word last) and verifies its CRC-16. Payload aliases b. Errors:
// *schemas.DecodeError wrapping ErrTruncated (under two words), ErrBadHeader
// (not a whole number of words), ErrBadMagic (BOE_1 or EOE_1 marker),
// ErrInconsistent (Evt_lgth differs from len(b)) or ErrCRCMismatch; with
// ErrCRCMismatch the decoded FED is returned too, so that callers may keep
// the corrupt fragment and flag it.
func DecodeFED(b []byte) (FED, error) {
	if len(b) < FEDMinSize {
		return FED{}, schemas.Errorf(fedFormat, "fragment", 0, schemas.ErrTruncated, "need %d bytes for header and trailer, have %d", FEDMinSize, len(b))
	}
	if len(b)%FEDWordSize != 0 {
		return FED{}, schemas.Errorf(fedFormat, "fragment", 0, schemas.ErrBadHeader, "%d bytes is not a whole number of 64-bit words", len(b))
	}
	tOff := len(b) - FEDWordSize
	if n := trailerWords(b[tOff:]); n != uint64(len(b)/FEDWordSize) {
		return FED{}, schemas.Errorf(fedFormat, "trailer.Evt_lgth", int64(tOff+4), schemas.ErrInconsistent, "Evt_lgth %d words, fragment has %d", n, len(b)/FEDWordSize)
	}
	f, err := decodeFED(b, 0)
	if err != nil {
		return FED{}, err
	}
	if got := FEDCRC(b); got != f.CRC {
		return f, schemas.Errorf(fedFormat, "trailer.CRC", int64(tOff+2), schemas.ErrCRCMismatch, "FED %d: stored 0x%04x, computed 0x%04x", f.SourceID, f.CRC, got)
	}
	return f, nil
}

// trailerWords returns Evt_lgth of the trailer word at the start of t.
func trailerWords(t []byte) uint64 {
	return binary.LittleEndian.Uint64(t) >> 32 & maxFEDWords
}

// decodeFED decodes the fragment b (len(b) >= FEDMinSize, a multiple of 8,
// matching Evt_lgth) found at byte offset base of the caller's buffer;
// it checks the markers but not the CRC.
func decodeFED(b []byte, base int) (FED, error) {
	le := binary.LittleEndian
	h := le.Uint64(b)
	tOff := len(b) - FEDWordSize
	t := le.Uint64(b[tOff:])
	if m := h >> 60; m != FEDHeaderMarker {
		return FED{}, schemas.Errorf(fedFormat, "header.BOE_1", int64(base+7), schemas.ErrBadMagic, "want 0x%x in bits 63:60, have 0x%x", FEDHeaderMarker, m)
	}
	if m := t >> 60; m != FEDTrailerMarker {
		return FED{}, schemas.Errorf(fedFormat, "trailer.EOE_1", int64(base+tOff+7), schemas.ErrBadMagic, "want 0x%x in bits 63:60, have 0x%x", FEDTrailerMarker, m)
	}
	return FED{
		EventType:    uint8(h >> 56 & 0xF),
		LV1ID:        uint32(h >> 32 & 0xFFFFFF),
		BXID:         uint16(h >> 20 & 0xFFF),
		SourceID:     uint16(h >> 8 & 0xFFF),
		FOV:          uint8(h >> 4 & 0xF),
		MoreHeaders:  h&(1<<3) != 0,
		CRC:          uint16(t >> 16),
		WrongFEDID:   t&(1<<15) != 0,
		SlinkError:   t&(1<<14) != 0,
		EvtStat:      uint8(t >> 8 & 0xF),
		TTS:          uint8(t >> 4 & 0xF),
		MoreTrailers: t&(1<<3) != 0,
		CRCModified:  t&(1<<2) != 0,
		Payload:      b[FEDWordSize:tOff:tOff],
		raw:          b,
	}, nil
}
