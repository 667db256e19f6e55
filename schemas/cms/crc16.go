package cms

import (
	"encoding/binary"

	"github.com/sluice-daq/sluice/schemas/internal/crc16"
)

// crc16Poly is the CRC-16/CMS generator polynomial x^16+x^15+x^2+1 (0x8005).
const crc16Poly = 0x8005

// crc16Table is the MSB-first table of crc16Poly; crc16Slice lets FEDCRC
// take a 64-bit word in one step (slicing-by-8) instead of eight.
var (
	crc16Table = crc16.MakeTable(crc16Poly)
	crc16Slice = crc16.MakeSlice8(crc16Table)
)

// CRC16 returns the CRC-16/CMS of b: poly 0x8005, init 0xFFFF, bytes fed
// most significant bit first (not reflected), no final xor. The check value
// of "123456789" is 0xAEE7 (FWCore/Utilities/interface/CRC16.h parameters).
func CRC16(b []byte) uint16 { return crc16Update(0xFFFF, b) }

func crc16Update(crc uint16, b []byte) uint16 { return crc16.Update(crc, crc16Table, b) }

// crcZeroMask clears, in the trailer's low 32-bit "conscheck" word, the CRC
// field (bits 31:16) and the R (15), F (14) and C (2) bits, which the FRL may
// set after the FED computed its CRC; the CMS DAQ forces them to zero before
// recomputing, and so do we.
const crcZeroMask = ^uint64(0xFFFF0000 | 0xC004)

// FEDCRC computes the CRC-16 of a FED fragment as the FED and the CMS DAQ
// do: over every 64-bit little-endian word of frag (header to trailer), each
// word fed from its most significant byte (byte 7) to its least (byte 0),
// with the trailer's CRC field and C, F, R bits taken as zero. frag must be
// a whole number of 64-bit words, at least two; the result is unspecified
// otherwise (callers check the length first).
func FEDCRC(frag []byte) uint16 {
	crc := uint16(0xFFFF)
	n := len(frag) / 8
	t := crc16Slice
	for i := 0; i < n; i++ {
		w := binary.LittleEndian.Uint64(frag[8*i:])
		if i == n-1 {
			w &= crcZeroMask
		}
		// The word's bytes enter most significant first: byte 7 meets the
		// register's high byte and is followed by seven more, so it goes
		// through t[7]; byte 0 enters last, through t[0].
		crc = t[7][byte(w>>56)^byte(crc>>8)] ^ t[6][byte(w>>48)^byte(crc)] ^
			t[5][byte(w>>40)] ^ t[4][byte(w>>32)] ^ t[3][byte(w>>24)] ^
			t[2][byte(w>>16)] ^ t[1][byte(w>>8)] ^ t[0][byte(w)]
	}
	return crc
}
