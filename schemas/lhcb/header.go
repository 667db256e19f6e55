package lhcb

import (
	"encoding/binary"

	"github.com/sluice-daq/sluice/schemas"
)

// MDF record constants.
const (
	// BaseHeaderSize is the part of the MDF header common to every version:
	// size[3], checksum, compression, hdr, data type, spare.
	BaseHeaderSize = 20
	// MaxHeaderSize is the largest header (versions 1 and 3).
	MaxHeaderSize = 48
	// DataTypeBanks and DataTypeMEP are the data types of a version 3
	// header: the body is raw banks, or one multi-event packet.
	DataTypeBanks uint8 = 1
	DataTypeMEP   uint8 = 2
	// MaxRecordSize bounds the size a reader accepts (1 GiB), so that a
	// corrupt size word cannot make it reserve more.
	MaxRecordSize = 1 << 30

	formatMDF = "mdf"
)

// Header is a decoded MDF record header of any version (see the package
// doc for the layouts). Fields a version does not have are zero.
type Header struct {
	Size           uint32    // record bytes including the header (the three equal size words)
	Checksum       uint32    // as stored; 0 = not computed
	Compression    uint8     // low nibble != 0: body compressed; high nibble: expansion factor - 1
	Version        uint8     // header version 0..3
	SubheaderWords uint8     // low nibble of the hdr byte: subheader length in 32-bit words
	DataType       uint8     // byte 18 (versions 1..3); only version 3 gives it a meaning
	Spare          uint8     // byte 19 (versions 1..3)
	TriggerMask    [4]uint32 // versions 0, 1, 3
	Run            uint32    // versions 1, 3
	Orbit          uint32    // versions 1, 3
	Bunch          uint32    // versions 1, 3
	EventType      uint8     // version 0 only
	TriggerNumber  uint64    // version 0 only: 40-bit L0 trigger number
}

// HeaderLen returns the header bytes (base + subheader) of an MDF header
// version, as LHCb's MDFHeader::sizeOf does, or 0 for an unknown version.
func HeaderLen(version uint8) int {
	switch version {
	case 0:
		return 40
	case 1, 3:
		return 48
	case 2:
		return BaseHeaderSize
	}
	return 0
}

// subheaderWords is the hdr low nibble a version must carry, or -1 when the
// version does not define it (version 0's overlaid subheader).
func subheaderWords(version uint8) int {
	switch version {
	case 1, 3:
		return 7
	case 2:
		return 0
	}
	return -1
}

// Len returns the header bytes of h's version.
func (h *Header) Len() int { return HeaderLen(h.Version) }

// Compressed reports whether the body is stored compressed.
func (h *Header) Compressed() bool { return h.Compression&0x0F != 0 }

// BodyType returns DataTypeMEP for a version 3 header of data type 2 and
// DataTypeBanks otherwise: versions 0–2 predate the data type and carry raw
// banks.
func (h *Header) BodyType() uint8 {
	if h.Version == 3 {
		return h.DataType
	}
	return DataTypeBanks
}

// DecodeHeader decodes and validates the MDF header at the start of b
// (offsets in errors are from the start of b). It checks that the version
// is known, that the three size words agree and cover at least the header
// and at most MaxRecordSize, that the hdr length nibble matches the version
// and that a version 3 data type is 1 or 2. It does not read the body.
// Errors: *schemas.DecodeError wrapping ErrTruncated, ErrBadVersion,
// ErrInconsistent, ErrBadHeader, ErrSizeOverflow or ErrUnsupported.
func DecodeHeader(b []byte) (Header, error) {
	le := binary.LittleEndian
	if len(b) < BaseHeaderSize {
		return Header{}, schemas.Errorf(formatMDF, "header", 0, schemas.ErrTruncated, "need %d bytes, have %d", BaseHeaderSize, len(b))
	}
	h := Header{
		Size:           le.Uint32(b[0:]),
		Checksum:       le.Uint32(b[12:]),
		Compression:    b[16],
		Version:        b[17] >> 4,
		SubheaderWords: b[17] & 0x0F,
	}
	hl := HeaderLen(h.Version)
	if hl == 0 {
		return Header{}, schemas.Errorf(formatMDF, "hdr", 17, schemas.ErrBadVersion, "header version %d, know 0..3", h.Version)
	}
	if s := le.Uint32(b[4:]); s != h.Size {
		return Header{}, schemas.Errorf(formatMDF, "size[1]", 4, schemas.ErrInconsistent, "size words disagree: size[0]=%d size[1]=%d", h.Size, s)
	}
	if s := le.Uint32(b[8:]); s != h.Size {
		return Header{}, schemas.Errorf(formatMDF, "size[2]", 8, schemas.ErrInconsistent, "size words disagree: size[0]=%d size[2]=%d", h.Size, s)
	}
	if h.Size < uint32(hl) {
		return Header{}, schemas.Errorf(formatMDF, "size[0]", 0, schemas.ErrBadHeader, "record size %d is smaller than the version %d header (%d bytes)", h.Size, h.Version, hl)
	}
	if h.Size > MaxRecordSize {
		return Header{}, schemas.Errorf(formatMDF, "size[0]", 0, schemas.ErrSizeOverflow, "record size %d exceeds the %d-byte limit", h.Size, MaxRecordSize)
	}
	if w := subheaderWords(h.Version); w >= 0 && int(h.SubheaderWords) != w {
		return Header{}, schemas.Errorf(formatMDF, "hdr", 17, schemas.ErrInconsistent, "header version %d has a %d-word subheader, hdr says %d", h.Version, w, h.SubheaderWords)
	}
	if len(b) < hl {
		return Header{}, schemas.Errorf(formatMDF, "subheader", BaseHeaderSize, schemas.ErrTruncated, "header version %d needs %d bytes, have %d", h.Version, hl, len(b))
	}
	switch h.Version {
	case 0:
		h.EventType = b[18]
		h.TriggerNumber = uint64(b[19])<<32 | uint64(le.Uint32(b[20:]))
		for i := range h.TriggerMask {
			h.TriggerMask[i] = le.Uint32(b[24+4*i:])
		}
	case 1, 2, 3:
		h.DataType, h.Spare = b[18], b[19]
		if h.Version == 2 {
			break
		}
		for i := range h.TriggerMask {
			h.TriggerMask[i] = le.Uint32(b[20+4*i:])
		}
		h.Run = le.Uint32(b[36:])
		h.Orbit = le.Uint32(b[40:])
		h.Bunch = le.Uint32(b[44:])
	}
	if h.Version == 3 && h.DataType != DataTypeBanks && h.DataType != DataTypeMEP {
		return Header{}, schemas.Errorf(formatMDF, "data_type", 18, schemas.ErrUnsupported, "data type %d, know 1 (banks) and 2 (MEP)", h.DataType)
	}
	return h, nil
}

// appendHeader appends h's version of the header to dst with the size words
// and checksum as given; the hdr length nibble is the version's (version 0
// keeps h.SubheaderWords, which that version does not define).
func appendHeader(dst []byte, h *Header) []byte {
	le := binary.LittleEndian
	var b [MaxHeaderSize]byte
	le.PutUint32(b[0:], h.Size)
	le.PutUint32(b[4:], h.Size)
	le.PutUint32(b[8:], h.Size)
	le.PutUint32(b[12:], h.Checksum)
	b[16] = h.Compression
	nib := h.SubheaderWords & 0x0F
	if w := subheaderWords(h.Version); w >= 0 {
		nib = uint8(w)
	}
	b[17] = h.Version<<4 | nib
	switch h.Version {
	case 0:
		b[18] = h.EventType
		b[19] = uint8(h.TriggerNumber >> 32)
		le.PutUint32(b[20:], uint32(h.TriggerNumber))
		for i, m := range h.TriggerMask {
			le.PutUint32(b[24+4*i:], m)
		}
	default:
		b[18], b[19] = h.DataType, h.Spare
		if h.Version == 2 {
			break
		}
		for i, m := range h.TriggerMask {
			le.PutUint32(b[20+4*i:], m)
		}
		le.PutUint32(b[36:], h.Run)
		le.PutUint32(b[40:], h.Orbit)
		le.PutUint32(b[44:], h.Bunch)
	}
	return append(dst, b[:HeaderLen(h.Version)]...)
}
