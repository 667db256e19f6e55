package atlas

import (
	"fmt"

	"github.com/sluice-daq/sluice/schemas"
)

// Status word 0 generic bits (low 16 bits; the high 16 are specific to the
// source), from eformat/Status.h.
const (
	StatusBCIDCheckFail    uint32 = 0x1
	StatusL1IDCheckFail    uint32 = 0x2
	StatusTimeout          uint32 = 0x4
	StatusDataCorruption   uint32 = 0x8
	StatusInternalOverflow uint32 = 0x10
	StatusDummyFragment    uint32 = 0x20
)

// robHeaderWords is the ROB header size without status words: the generic
// six, and the checksum type.
const robHeaderWords = 7

// ROB is a decoded ROB fragment: one readout buffer's data for one event,
// normally one ROD fragment (decode it with ROD). Slices are word values,
// independent of the byte order the fragment had.
type ROB struct {
	Version      uint32 // VersionV40 or VersionV50 (the same ROB layout)
	SourceID     uint32
	Status       []uint32
	ChecksumType ChecksumType
	Checksum     uint32   // as stored; 0 when ChecksumType is none
	ChecksumOK   bool     // the stored checksum matches (true for none)
	Payload      []uint32 // the ROD fragment's words

	payloadOff int64 // byte offset of Payload in the decoded buffer
	// keepChecksum is set by the decoder on a checksum mismatch, so that
	// re-encoding writes the stored checksum back rather than hide the
	// corruption behind a fresh one.
	keepChecksum bool
	// le is the decoded fragment's little-endian bytes (aliasing the input
	// when it was little-endian), nil for a ROB built by hand.
	le []byte
}

// Words is the ROB's encoded size in words.
func (r *ROB) Words() int {
	n := robHeaderWords + len(r.Status) + len(r.Payload)
	if r.ChecksumType != ChecksumNone {
		n++
	}
	return n
}

// GenericStatus is the low 16 bits of status word 0 (0 when there is none).
func (r *ROB) GenericStatus() uint32 {
	if len(r.Status) == 0 {
		return 0
	}
	return r.Status[0] & 0xFFFF
}

// ROD decodes the ROB's payload as a ROD fragment, with error offsets in
// the buffer the ROB was decoded from.
func (r *ROB) ROD() (ROD, error) { return decodeROD(r.Payload, r.payloadOff) }

// AppendWords appends the ROB's words to dst, computing its checksum
// (r.Checksum is ignored), except for a decoded ROB whose checksum did not
// match: its stored checksum is written back unchanged, so that the
// corruption stays visible. Errors: an unknown checksum type.
func (r *ROB) AppendWords(dst []uint32) ([]uint32, error) {
	sum, ok := Checksum(r.ChecksumType, r.Payload)
	if !ok {
		return dst, fmt.Errorf("atlas: ROB 0x%08x: unknown checksum type %d", r.SourceID, r.ChecksumType)
	}
	if r.keepChecksum {
		sum = r.Checksum
	}
	hs := uint32(robHeaderWords + len(r.Status))
	dst = append(dst, MarkerROB, uint32(r.Words()), hs, r.Version, r.SourceID, uint32(len(r.Status)))
	dst = append(append(dst, r.Status...), uint32(r.ChecksumType))
	dst = append(dst, r.Payload...)
	if r.ChecksumType != ChecksumNone {
		dst = append(dst, sum)
	}
	return dst, nil
}

// AppendROB appends r as a ROB fragment in byte order o to dst, with its
// checksum computed as AppendWords does. Errors: an unknown checksum type.
func AppendROB(dst []byte, r *ROB, o ByteOrder) ([]byte, error) {
	w, err := r.AppendWords(nil)
	if err != nil {
		return dst, err
	}
	return appendWords(dst, o, w...), nil
}

// DecodeROB decodes the ROB fragment at the start of b, in whichever byte
// order its marker shows, verifies its checksum and returns it with the
// bytes it occupies and the byte order. The ROD payload is not decoded
// (see ROB.ROD). Errors: *schemas.DecodeError wrapping ErrTruncated,
// ErrBadMagic, ErrBadVersion, ErrSizeOverflow, ErrBadHeader, ErrUnsupported
// (checksum type) or ErrCRCMismatch, which comes with the decoded ROB.
func DecodeROB(b []byte) (ROB, int, ByteOrder, error) {
	o, err := order(b, MarkerROB, fmtROB)
	if err != nil {
		return ROB{}, 0, nil, err
	}
	size, err := fragmentSize(b, o, fmtROB)
	if err != nil {
		return ROB{}, 0, nil, err
	}
	w, le := image(b[:4*size], o)
	r, err := decodeROB(w, le, 0)
	return r, 4 * size, o, err
}

// fragmentSize reads the fragment size word of the generic header at the
// start of b and checks that b holds that many words.
func fragmentSize(b []byte, o ByteOrder, format string) (int, error) {
	if len(b) < 8 {
		return 0, schemas.Errorf(format, "fragment_size", 4, schemas.ErrTruncated, "need 8 bytes, have %d", len(b))
	}
	size := uint64(o.Uint32(b[4:]))
	if 4*size > uint64(len(b)) {
		return 0, schemas.Errorf(format, "fragment_size", 4, schemas.ErrTruncated, "fragment of %d words needs %d bytes, have %d", size, 4*size, len(b))
	}
	return int(size), nil
}

// genericHeader is the part of the header full events and ROBs share.
type genericHeader struct {
	size, hsize, version, source uint32
	status                       []uint32
	checksumType                 ChecksumType
	payload                      []uint32 // words between header and checksum
	payloadAt                    int      // word index of payload
	payloadLE                    []byte   // payload's little-endian bytes
	checksum                     uint32
}

// decodeGeneric decodes the generic header of the fragment w (exactly
// fragment-size words, w[0] the marker already checked) at byte offset base,
// and locates its payload. minHeader is the smallest header size the
// fragment type allows beyond the status words.
func decodeGeneric(w []uint32, le []byte, base int64, format string, minHeader int) (genericHeader, error) {
	at := func(i int) int64 { return base + 4*int64(i) }
	if len(w) < 6 {
		return genericHeader{}, schemas.Errorf(format, "fragment_size", base+4, schemas.ErrSizeOverflow, "fragment_size %d words is smaller than the 6-word generic header", len(w))
	}
	g := genericHeader{size: w[1], hsize: w[2], version: w[3], source: w[4]}
	n := uint64(len(w))
	if uint64(g.hsize) > n {
		return g, schemas.Errorf(format, "header_size", at(2), schemas.ErrSizeOverflow, "header of %d words in a fragment of %d", g.hsize, n)
	}
	switch major := g.version >> 16; major {
	case VersionV40 >> 16, VersionV50 >> 16:
	default:
		return g, schemas.Errorf(format, "version", at(3), schemas.ErrBadVersion, "want major 0x0400 or 0x0500, have 0x%08x", g.version)
	}
	if format == fmtFull && g.version>>16 == VersionV50>>16 {
		minHeader = fullFixedWordsV50
	}
	nstatus := uint64(w[5])
	if 6+nstatus+uint64(minHeader) > uint64(g.hsize) {
		return g, schemas.Errorf(format, "nstatus", at(5), schemas.ErrSizeOverflow, "%d status words do not fit a header of %d words", nstatus, g.hsize)
	}
	g.status = w[6 : 6+nstatus : 6+nstatus]
	g.checksumType = ChecksumType(w[6+nstatus])
	end := len(w)
	if g.checksumType != ChecksumNone {
		if !g.checksumType.known() {
			return g, schemas.Errorf(format, "checksum_type", at(6+int(nstatus)), schemas.ErrUnsupported, "checksum type %d (know 0 none, 1 CRC16-CCITT, 2 Adler-32)", g.checksumType)
		}
		if int(g.hsize) == end {
			return g, schemas.Errorf(format, "fragment_size", at(1), schemas.ErrSizeOverflow, "no room for the checksum word after a header of %d words", g.hsize)
		}
		end--
		g.checksum = w[end]
	}
	g.payloadAt = int(g.hsize)
	g.payload = w[g.hsize:end:end]
	g.payloadLE = le[4*g.hsize : 4*end : 4*end]
	return g, nil
}

// verify checks g's checksum; on mismatch it returns ErrCRCMismatch at the
// checksum word.
func (g *genericHeader) verify(base int64, format string) error {
	got, _ := checksumLE(g.checksumType, g.payload, g.payloadLE)
	if got != g.checksum {
		return schemas.Errorf(format, "checksum", base+4*int64(g.size-1), schemas.ErrCRCMismatch, "source 0x%08x: %v stored 0x%08x, computed 0x%08x", g.source, g.checksumType, g.checksum, got)
	}
	return nil
}

// decodeROB decodes the ROB words w (exactly its fragment size) with
// their little-endian bytes le, found at byte offset base.
func decodeROB(w []uint32, le []byte, base int64) (ROB, error) {
	if len(w) > 0 && w[0] != MarkerROB {
		return ROB{}, schemas.Errorf(fmtROB, "marker", base, schemas.ErrBadMagic, "want 0x%08x, have 0x%08x", MarkerROB, w[0])
	}
	g, err := decodeGeneric(w, le, base, fmtROB, 1)
	if err != nil {
		return ROB{}, err
	}
	if want := uint64(robHeaderWords) + uint64(len(g.status)); uint64(g.hsize) != want {
		return ROB{}, schemas.Errorf(fmtROB, "header_size", base+8, schemas.ErrBadHeader, "a ROB header with %d status words has %d words, field says %d", len(g.status), want, g.hsize)
	}
	r := ROB{
		Version: g.version, SourceID: g.source, Status: g.status, ChecksumType: g.checksumType,
		Checksum: g.checksum, Payload: g.payload, payloadOff: base + 4*int64(g.payloadAt), le: le,
	}
	err = g.verify(base, fmtROB)
	r.ChecksumOK, r.keepChecksum = err == nil, err != nil
	return r, err
}
