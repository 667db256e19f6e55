package atlas

import (
	"encoding/binary"
	"math/bits"

	"github.com/sluice-daq/sluice/schemas"
)

// Markers of the eformat fragments (eformat/HeaderMarker.h).
const (
	MarkerFullEvent uint32 = 0xaa1234aa
	MarkerROB       uint32 = 0xdd1234dd
	MarkerROD       uint32 = 0xee1234ee
)

// Format versions (major in the high 16 bits).
const (
	VersionV40     uint32 = 0x04000000 // full event and ROB, eformat 4.0
	VersionV50     uint32 = 0x05000000 // eformat 5.0 (DEFAULT_VERSION since Run 2): full event and ROB
	RODVersion     uint32 = 0x03010000 // DEFAULT_ROD_VERSION
	rodMajor              = RODVersion >> 16
	RODHeaderSize         = 9
	RODTrailerSize        = 3
)

const (
	fmtFull = "atlas-full-event"
	fmtROB  = "atlas-rob"
	fmtROD  = "atlas-rod"
)

// ByteOrder is the byte order of a fragment's words on disk:
// binary.LittleEndian or binary.BigEndian.
type ByteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

// DetectOrder returns the byte order in which b's first word reads as
// marker, or nil when it matches in neither order (or b is shorter than a
// word).
func DetectOrder(b []byte, marker uint32) ByteOrder {
	if len(b) < 4 {
		return nil
	}
	switch binary.LittleEndian.Uint32(b) {
	case marker:
		return binary.LittleEndian
	case bits.ReverseBytes32(marker):
		return binary.BigEndian
	}
	return nil
}

// order finds the byte order of the fragment at the start of b from its
// marker.
func order(b []byte, marker uint32, format string) (ByteOrder, error) {
	if len(b) < 4 {
		return nil, schemas.Errorf(format, "marker", 0, schemas.ErrTruncated, "need 4 bytes, have %d", len(b))
	}
	o := DetectOrder(b, marker)
	if o == nil {
		return nil, schemas.Errorf(format, "marker", 0, schemas.ErrBadMagic, "want 0x%08x in either byte order, have 0x%08x", marker, binary.LittleEndian.Uint32(b))
	}
	return o, nil
}

// toWords converts b (a multiple of 4 bytes) to word values.
func toWords(b []byte, o ByteOrder) []uint32 {
	w, _ := image(b, o)
	return w
}

// image converts b (a multiple of 4 bytes, in byte order o) to word values
// and to their little-endian bytes: b itself when it is little-endian,
// else a swapped copy made in the same pass. Checksums and the splitter
// work on the little-endian bytes, so that they need no further copy.
func image(b []byte, o ByteOrder) (w []uint32, le []byte) {
	w = make([]uint32, len(b)/4)
	if o == ByteOrder(binary.LittleEndian) {
		for i := range w {
			w[i] = binary.LittleEndian.Uint32(b[4*i:])
		}
		return w, b
	}
	// Concrete byte orders here: a call through the interface per word
	// costs more than the swap itself.
	le = make([]byte, len(b))
	for i := range w {
		w[i] = binary.BigEndian.Uint32(b[4*i:])
		binary.LittleEndian.PutUint32(le[4*i:], w[i])
	}
	return w, le
}

// appendWords appends words to dst in byte order o.
func appendWords(dst []byte, o ByteOrder, words ...uint32) []byte {
	for _, w := range words {
		dst = o.AppendUint32(dst, w)
	}
	return dst
}
