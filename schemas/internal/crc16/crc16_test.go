package crc16

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// bitwise is an independent, bit-at-a-time CRC-16 to check the tables.
func bitwise(poly, crc uint16, b []byte) uint16 {
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ poly
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// TestCheckValues checks the catalogue check values ("123456789") of the
// three parameter sets the formats use.
func TestCheckValues(t *testing.T) {
	for _, c := range []struct {
		name       string
		poly, init uint16
		want       uint16
	}{
		{"CRC-16/CMS", 0x8005, 0xFFFF, 0xAEE7},
		{"CRC-16/UMTS (Mark 5B)", 0x8005, 0, 0xFEE8},
		{"CRC-16/CCITT-FALSE (eformat)", 0x1021, 0xFFFF, 0x29B1},
	} {
		if got := Update(c.init, MakeTable(c.poly), []byte("123456789")); got != c.want {
			t.Errorf("%s: 0x%04X, want 0x%04X", c.name, got, c.want)
		}
	}
}

func TestTableMatchesBitwise(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, poly := range []uint16{0x8005, 0x1021} {
		tab := MakeTable(poly)
		for n := range 100 {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			init := uint16(r.Uint32())
			if got, want := Update(init, tab, b), bitwise(poly, init, b); got != want {
				t.Fatalf("poly %#x, %d bytes: table 0x%04X, bitwise 0x%04X", poly, n, got, want)
			}
		}
	}
}

// TestSlice8 feeds eight bytes at a time through the slicing tables and
// compares with byte-at-a-time updates.
func TestSlice8(t *testing.T) {
	tab := MakeTable(0x8005)
	s := MakeSlice8(tab)
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], r.Uint64())
		crc := uint16(r.Uint32())
		got := s[7][b[0]^byte(crc>>8)] ^ s[6][b[1]^byte(crc)] ^ s[5][b[2]] ^ s[4][b[3]] ^ s[3][b[4]] ^ s[2][b[5]] ^ s[1][b[6]] ^ s[0][b[7]]
		if want := Update(crc, tab, b[:]); got != want {
			t.Fatalf("% x from 0x%04X: sliced 0x%04X, bytewise 0x%04X", b, crc, got, want)
		}
	}
}
