package schemas

import (
	"encoding/binary"
	"hash/crc32"
)

// Fragment layout constants (see the package doc for the table).
const (
	FragmentMagic      uint32 = 0x47464C53 // "SLFG" on the wire
	FragmentVersion    uint8  = 1
	FragmentHeaderSize        = 32
)

// FragmentFlag bits are set by a source on a fragment (or on every fragment
// of a multi-fragment packet).
type FragmentFlag uint16

const (
	// FlagSourceError: the source reports an error in its own data.
	FlagSourceError FragmentFlag = 1 << 0
	// FlagTruncated: the source cut the fragment (buffer overflow on the board).
	FlagTruncated FragmentFlag = 1 << 1
	// FlagEmpty: the source had no data for this event; payload is empty.
	FlagEmpty FragmentFlag = 1 << 2
)

// CRCTable is the CRC-32C (Castagnoli) table used by every native format.
var CRCTable = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C (Castagnoli) of b.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, CRCTable) }

// Fragment is one source's data for one event. Payload aliases the buffer
// it was decoded from; nothing is copied.
type Fragment struct {
	SourceID uint32
	EventID  uint64
	Flags    FragmentFlag
	CRC      uint32 // CRC-32C of Payload as sent by the source
	Payload  []byte
}

// CRCValid reports whether the stored CRC-32C matches the payload.
func (f *Fragment) CRCValid() bool { return Checksum(f.Payload) == f.CRC }

// EncodedLen is the number of bytes AppendFragment adds.
func (f *Fragment) EncodedLen() int { return FragmentHeaderSize + len(f.Payload) }

// AppendFragment appends f in the native fragment layout to dst. If
// computeCRC is true the CRC-32C of the payload is computed and written
// (f.CRC is ignored); otherwise f.CRC is written as is (used to inject
// corruption in tests and the readout emulator).
func AppendFragment(dst []byte, f *Fragment, computeCRC bool) []byte {
	crc := f.CRC
	if computeCRC {
		crc = Checksum(f.Payload)
	}
	var h [FragmentHeaderSize]byte
	binary.LittleEndian.PutUint32(h[0:], FragmentMagic)
	h[4] = FragmentVersion
	h[5] = FragmentHeaderSize
	binary.LittleEndian.PutUint16(h[6:], uint16(f.Flags))
	binary.LittleEndian.PutUint32(h[8:], f.SourceID)
	binary.LittleEndian.PutUint32(h[12:], uint32(len(f.Payload)))
	binary.LittleEndian.PutUint64(h[16:], f.EventID)
	binary.LittleEndian.PutUint32(h[24:], crc)
	dst = append(dst, h[:]...)
	return append(dst, f.Payload...)
}

// DecodeFragment reads one native fragment from the start of b and returns
// it with the number of bytes it occupies. The payload aliases b. The CRC is
// not verified here (the builder keeps corrupt fragments and flags their
// event); call CRCValid. Errors: *DecodeError wrapping ErrTruncated,
// ErrBadMagic, ErrBadVersion, ErrBadHeader or ErrSizeOverflow.
func DecodeFragment(b []byte) (Fragment, int, error) {
	const format = "fragment"
	if len(b) < FragmentHeaderSize {
		return Fragment{}, 0, Errorf(format, "header", 0, ErrTruncated, "need %d bytes, have %d", FragmentHeaderSize, len(b))
	}
	if m := binary.LittleEndian.Uint32(b); m != FragmentMagic {
		return Fragment{}, 0, Errorf(format, "magic", 0, ErrBadMagic, "want 0x%08x, have 0x%08x", FragmentMagic, m)
	}
	if b[4] != FragmentVersion {
		return Fragment{}, 0, Errorf(format, "version", 4, ErrBadVersion, "want %d, have %d", FragmentVersion, b[4])
	}
	hs := int(b[5])
	if hs < FragmentHeaderSize {
		return Fragment{}, 0, Errorf(format, "header_size", 5, ErrBadHeader, "want >= %d, have %d", FragmentHeaderSize, hs)
	}
	n := binary.LittleEndian.Uint32(b[12:])
	total := uint64(hs) + uint64(n)
	if total > uint64(len(b)) {
		return Fragment{}, 0, Errorf(format, "payload", int64(hs), ErrTruncated, "payload_len %d needs %d bytes, have %d", n, total, len(b))
	}
	f := Fragment{
		Flags:    FragmentFlag(binary.LittleEndian.Uint16(b[6:])),
		SourceID: binary.LittleEndian.Uint32(b[8:]),
		EventID:  binary.LittleEndian.Uint64(b[16:]),
		CRC:      binary.LittleEndian.Uint32(b[24:]),
		Payload:  b[hs:total:total],
	}
	return f, int(total), nil
}
