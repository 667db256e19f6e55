package cms

import (
	"encoding/binary"
	"fmt"
	"hash/adler32"
	"math"

	"github.com/sluice-daq/sluice/schemas"
)

const frdFormat = "cms-frd"

// FRD event versions this package reads and writes.
const (
	FRDMinVersion = 3
	FRDMaxVersion = 6
)

// FRDFlagGenData is bit 0 of the v6 flags (FRDEVENT_MASK_ISGENDATA): the
// event was generated, not read out.
const FRDFlagGenData uint16 = 1 << 0

// FRDEvent is one event as the CMS event builder hands it to the HLT: an FRD
// header and the concatenated FED fragments (Data). Data aliases the buffer
// the event was decoded from.
type FRDEvent struct {
	Version  uint16 // 3..6
	Flags    uint16 // v6 only (FRDFlagGenData); 0 otherwise
	Run      uint32
	Lumi     uint32 // luminosity section
	Event    uint64 // event number; 32 bits except in v4
	Padding  uint32 // v3/v4: zero bytes written after Data
	Checksum uint32 // Adler-32 (v3, v4) or CRC-32C (v5, v6) of Data, as stored
	Data     []byte
}

// FRDHeaderSize returns the header size in bytes of FRD version v (3..6), or
// 0 for a version this package does not handle.
func FRDHeaderSize(v uint16) int {
	switch v {
	case 3:
		return 28
	case 4:
		return 32
	case 5, 6:
		return 24
	}
	return 0
}

// FRDChecksum returns the checksum an FRD event of version v stores for
// data: Adler-32 (zlib's, as cmssw's cms::Adler32) for v3 and v4, CRC-32C
// (Castagnoli) for v5 and v6.
func FRDChecksum(v uint16, data []byte) uint32 {
	if v <= 4 {
		return adler32.Checksum(data)
	}
	return schemas.Checksum(data)
}

// EncodedLen is the number of bytes AppendFRD adds for e.
func (e *FRDEvent) EncodedLen() int {
	n := FRDHeaderSize(e.Version) + len(e.Data)
	if e.Version <= 4 {
		n += int(e.Padding)
	}
	return n
}

// AppendFRD appends e as an FRD event of e.Version to dst, computing
// eventSize and the checksum (e.Checksum is ignored) and writing e.Padding
// zero bytes after the data for v3/v4. Errors: a version outside 3..6, an
// event number over 32 bits outside v4, flags outside v6, padding in v5/v6,
// or data over 4 GiB.
func AppendFRD(dst []byte, e *FRDEvent) ([]byte, error) {
	switch {
	case e.Version < FRDMinVersion || e.Version > FRDMaxVersion:
		return dst, fmt.Errorf("cms: FRD version %d, want %d..%d", e.Version, FRDMinVersion, FRDMaxVersion)
	case e.Version != 4 && e.Event > math.MaxUint32:
		return dst, fmt.Errorf("cms: FRD v%d holds a 32-bit event number, have %d", e.Version, e.Event)
	case e.Version != 6 && e.Flags != 0:
		return dst, fmt.Errorf("cms: FRD v%d has no flags field, have flags 0x%x", e.Version, e.Flags)
	case e.Version >= 5 && e.Padding != 0:
		return dst, fmt.Errorf("cms: FRD v%d has no padding field, have %d", e.Version, e.Padding)
	case uint64(len(e.Data)) > math.MaxUint32:
		return dst, fmt.Errorf("cms: FRD event data of %d bytes exceeds the 32-bit eventSize", len(e.Data))
	}
	le := binary.LittleEndian
	sum := FRDChecksum(e.Version, e.Data)
	size := uint32(len(e.Data))
	if e.Version == 6 {
		dst = le.AppendUint16(dst, 6)
		dst = le.AppendUint16(dst, e.Flags)
	} else {
		dst = le.AppendUint32(dst, uint32(e.Version))
	}
	dst = le.AppendUint32(dst, e.Run)
	dst = le.AppendUint32(dst, e.Lumi)
	dst = le.AppendUint32(dst, uint32(e.Event))
	if e.Version == 4 {
		dst = le.AppendUint32(dst, uint32(e.Event>>32))
	}
	dst = le.AppendUint32(dst, size)
	if e.Version <= 4 {
		dst = le.AppendUint32(dst, e.Padding)
	}
	dst = le.AppendUint32(dst, sum)
	dst = append(dst, e.Data...)
	if e.Version <= 4 {
		dst = append(dst, make([]byte, e.Padding)...)
	}
	return dst, nil
}

// frdVersion reads the version from the first 4 header bytes: v6 keeps it
// in the low 16 bits (flags in the high 16), earlier versions use all 32.
func frdVersion(b []byte) (version uint16, flags uint16, ok bool) {
	w := binary.LittleEndian.Uint32(b)
	if w&0xFFFF == 6 {
		return 6, uint16(w >> 16), true
	}
	if w >= FRDMinVersion && w <= 5 {
		return uint16(w), 0, true
	}
	return 0, 0, false
}

// decodeFRDHeader decodes the fixed header at the start of h (which holds
// at least FRDHeaderSize(version) bytes) into e, leaving Data nil.
func decodeFRDHeader(h []byte, version, flags uint16) FRDEvent {
	le := binary.LittleEndian
	e := FRDEvent{Version: version, Flags: flags, Run: le.Uint32(h[4:]), Lumi: le.Uint32(h[8:]), Event: uint64(le.Uint32(h[12:]))}
	off := 16
	if version == 4 {
		e.Event |= uint64(le.Uint32(h[16:])) << 32
		off = 20
	}
	off += 4 // eventSize, read by the caller
	if version <= 4 {
		e.Padding = le.Uint32(h[off:])
		off += 4
	}
	e.Checksum = le.Uint32(h[off:])
	return e
}

// frdSizeOffset is the offset of eventSize in an FRD header.
func frdSizeOffset(version uint16) int {
	if version == 4 {
		return 20
	}
	return 16
}

// DecodeFRDHeader decodes only the FRD header at the start of b and
// returns the event without its data (Data nil, checksum not verified), the
// header size and eventSize, the bytes of FED data that follow the header
// (then Padding bytes for v3/v4). Errors: *schemas.DecodeError wrapping
// ErrTruncated or ErrBadVersion (a version other than 3..6, including the
// legacy v1/v2 that no current writer produces).
func DecodeFRDHeader(b []byte) (e FRDEvent, headerSize int, dataSize uint32, err error) {
	if len(b) < 4 {
		return FRDEvent{}, 0, 0, schemas.Errorf(frdFormat, "header.version", 0, schemas.ErrTruncated, "need 4 bytes, have %d", len(b))
	}
	version, flags, ok := frdVersion(b)
	if !ok {
		return FRDEvent{}, 0, 0, schemas.Errorf(frdFormat, "header.version", 0, schemas.ErrBadVersion, "want %d..%d, have 0x%08x", FRDMinVersion, FRDMaxVersion, binary.LittleEndian.Uint32(b))
	}
	hs := FRDHeaderSize(version)
	if len(b) < hs {
		return FRDEvent{}, 0, 0, schemas.Errorf(frdFormat, "header", 0, schemas.ErrTruncated, "v%d header needs %d bytes, have %d", version, hs, len(b))
	}
	return decodeFRDHeader(b, version, flags), hs, binary.LittleEndian.Uint32(b[frdSizeOffset(version):]), nil
}

// DecodeFRD decodes the FRD event at the start of b, verifies its checksum
// and returns it with the bytes it occupies (header, data and padding).
// Data aliases b. Errors: those of DecodeFRDHeader, ErrTruncated for data
// or padding past the end of b, and ErrCRCMismatch (returned with the
// decoded event, so that a caller may keep it and flag it).
func DecodeFRD(b []byte) (FRDEvent, int, error) {
	e, hs, size, err := DecodeFRDHeader(b)
	if err != nil {
		return FRDEvent{}, 0, err
	}
	end := uint64(hs) + uint64(size) + uint64(e.Padding)
	if end > uint64(len(b)) {
		return FRDEvent{}, 0, schemas.Errorf(frdFormat, "data", int64(hs), schemas.ErrTruncated, "eventSize %d + paddingSize %d need %d bytes, have %d", size, e.Padding, end, len(b))
	}
	dataEnd := hs + int(size)
	e.Data = b[hs:dataEnd:dataEnd]
	if got := FRDChecksum(e.Version, e.Data); got != e.Checksum {
		return e, int(end), schemas.Errorf(frdFormat, "header.checksum", int64(hs-4), schemas.ErrCRCMismatch, "%s stored 0x%08x, computed 0x%08x", checksumName(e.Version), e.Checksum, got)
	}
	return e, int(end), nil
}

func checksumName(v uint16) string {
	if v <= 4 {
		return "adler32"
	}
	return "crc32c"
}
