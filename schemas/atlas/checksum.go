package atlas

import (
	"encoding/binary"
	"fmt"
	"hash/adler32"

	"github.com/sluice-daq/sluice/schemas/internal/crc16"
)

// ChecksumType says which checksum follows a fragment's payload
// (eformat/checksum.h).
type ChecksumType uint32

const (
	ChecksumNone       ChecksumType = 0
	ChecksumCRC16CCITT ChecksumType = 1
	ChecksumAdler32    ChecksumType = 2
)

func (c ChecksumType) String() string {
	switch c {
	case ChecksumNone:
		return "none"
	case ChecksumCRC16CCITT:
		return "crc16-ccitt"
	case ChecksumAdler32:
		return "adler32"
	}
	return fmt.Sprintf("checksum-type-%d", uint32(c))
}

// ccittTable is the MSB-first table of the CCITT polynomial 0x1021.
var ccittTable = crc16.MakeTable(0x1021)

// CRC16CCITT returns the CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, not
// reflected, no final xor; check("123456789") = 0x29B1) of words, each fed
// most significant byte first, zero-extended to 32 bits as eformat stores it.
func CRC16CCITT(words []uint32) uint32 {
	crc := uint16(0xFFFF)
	for _, w := range words {
		crc = ccittUpdate(crc, byte(w>>24), byte(w>>16), byte(w>>8), byte(w))
	}
	return uint32(crc)
}

func ccittUpdate(crc uint16, b ...byte) uint16 { return crc16.Update(crc, ccittTable, b) }

// Adler32 returns zlib's Adler-32 of words laid out little-endian, as eformat
// computes it over its in-memory word buffer on x86.
func Adler32(words []uint32) uint32 {
	h := adler32.New()
	var b [4096]byte
	for len(words) > 0 {
		n := min(len(words), len(b)/4)
		for i, w := range words[:n] {
			binary.LittleEndian.PutUint32(b[4*i:], w)
		}
		h.Write(b[:4*n])
		words = words[n:]
	}
	return h.Sum32()
}

// known reports whether this package can compute checksums of type c.
func (c ChecksumType) known() bool { return c <= ChecksumAdler32 }

// checksumLE is Checksum for words whose little-endian bytes le the caller
// already has, sparing Adler-32 the staging copy.
func checksumLE(t ChecksumType, words []uint32, le []byte) (uint32, bool) {
	if t == ChecksumAdler32 {
		return adler32.Checksum(le), true
	}
	return Checksum(t, words)
}

// Checksum returns the checksum of type t over words, and false for a type
// this package does not know.
func Checksum(t ChecksumType, words []uint32) (uint32, bool) {
	switch t {
	case ChecksumNone:
		return 0, true
	case ChecksumCRC16CCITT:
		return CRC16CCITT(words), true
	case ChecksumAdler32:
		return Adler32(words), true
	}
	return 0, false
}
