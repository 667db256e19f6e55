// Package crc16 computes the CRC-16s the formats carry, all of them fed
// most significant bit first (not reflected) with no final xor: the CMS
// FED trailer's (poly 0x8005, init 0xFFFF), the Mark 5B time code's (poly
// 0x8005, init 0) and eformat's CRC-16/CCITT-FALSE (poly 0x1021, init
// 0xFFFF). The formats differ only in polynomial, initial register and
// which bytes they feed, so the table arithmetic is written once here.
package crc16

// Table[i] is the register after shifting byte i through an empty (zero)
// register, most significant bit first.
type Table [256]uint16

// MakeTable returns the table of the generator polynomial poly (its x^16
// term implied: 0x8005 is x^16+x^15+x^2+1).
func MakeTable(poly uint16) *Table {
	t := new(Table)
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ poly
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}

// Update returns the register crc after feeding it the bytes p in order.
func Update(crc uint16, t *Table, p []byte) uint16 {
	for _, c := range p {
		crc = crc<<8 ^ t[byte(crc>>8)^c]
	}
	return crc
}

// Slice8 holds, for k = 0..7, the register after shifting byte i followed
// by k zero bytes through an empty register (Slice8[0] is the Table). It
// lets a caller feed eight bytes in one step (slicing-by-8): for bytes
// b0..b7 in feeding order and register r,
//
//	r' = S[7][b0^r>>8] ^ S[6][b1^r&0xFF] ^ S[5][b2] ^ … ^ S[0][b7]
type Slice8 [8]Table

// MakeSlice8 returns the slicing tables of t.
func MakeSlice8(t *Table) *Slice8 {
	s := new(Slice8)
	s[0] = *t
	for k := 1; k < 8; k++ {
		for i := range 256 {
			c := s[k-1][i]
			s[k][i] = c<<8 ^ t[c>>8]
		}
	}
	return s
}
