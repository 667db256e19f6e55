package cms

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestCRC16Check checks the catalogue check value of the CRC-16/CMS
// parameter set (the FED trailer CRC of cms-sw/cmssw, documented in doc.go).
func TestCRC16Check(t *testing.T) {
	if got := CRC16([]byte("123456789")); got != 0xAEE7 {
		t.Fatalf("CRC16(\"123456789\") = 0x%04X, want 0xAEE7", got)
	}
}

// TestCRC16HandVector checks a value worked out by hand, bit by bit, for
// the single byte 0x00. The register starts at 0xFFFF; the byte is xored
// into its top 8 bits (no change for 0x00); then 8 times: shift left by
// one, and when the bit shifted out was 1, xor 0x8005:
//
//	0xFFFF -> 0xFFFE^0x8005 = 0x7FFB   (top bit was 1)
//	0x7FFB -> 0xFFF6                    (0)
//	0xFFF6 -> 0xFFEC^0x8005 = 0x7FE9   (1)
//	0x7FE9 -> 0xFFD2                    (0)
//	0xFFD2 -> 0xFFA4^0x8005 = 0x7FA1   (1)
//	0x7FA1 -> 0xFF42                    (0)
//	0xFF42 -> 0xFE84^0x8005 = 0x7E81   (1)
//	0x7E81 -> 0xFD02                    (0)
//
// No final xor: CRC16({0x00}) = 0xFD02.
func TestCRC16HandVector(t *testing.T) {
	if got := CRC16([]byte{0x00}); got != 0xFD02 {
		t.Fatalf("CRC16({0x00}) = 0x%04X, want 0xFD02", got)
	}
}

// crc16Bitwise is an independent, bit-at-a-time implementation of the same
// parameters, to cross-check the table.
func crc16Bitwise(b []byte) uint16 {
	crc := uint16(0xFFFF)
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x8005
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

func TestCRC16TableMatchesBitwise(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 200; n++ {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		if got, want := CRC16(b), crc16Bitwise(b); got != want {
			t.Fatalf("len %d: table 0x%04X, bitwise 0x%04X", n, got, want)
		}
	}
}

// TestFEDCRCWordOrder spells out the byte stream FEDCRC must feed for a
// two-word fragment: each 64-bit LE word from byte 7 down to byte 0, the
// trailer with its CRC field and R, F, C bits zeroed.
func TestFEDCRCWordOrder(t *testing.T) {
	frag := []byte{
		0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x58, // header word 0x5870605040302010
		0x0C, 0xC0, 0xEE, 0xFF, 0x02, 0x00, 0x00, 0xA0, // trailer 0xA0000002FFEEC00C: CRC 0xFFEE, R, F, C set
	}
	stream := []byte{
		0x58, 0x70, 0x60, 0x50, 0x40, 0x30, 0x20, 0x10,
		0xA0, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x08, // CRC, R (bit 15), F (14), C (2) cleared; T (bit 3) kept
	}
	if got, want := FEDCRC(frag), crc16Bitwise(stream); got != want {
		t.Fatalf("FEDCRC = 0x%04X, want 0x%04X (CRC of the MSB-first stream)", got, want)
	}
}

// TestFEDCRCIgnoresFRLBits: the FRL may set R, F, C and rewrite the CRC
// after the FED computed it; none of that may change the computed CRC.
func TestFEDCRCIgnoresFRLBits(t *testing.T) {
	b, err := AppendFED(nil, &FED{SourceID: 812, LV1ID: 7, Payload: make([]byte, 16)})
	if err != nil {
		t.Fatal(err)
	}
	want := FEDCRC(b)
	tr := len(b) - 8
	w := binary.LittleEndian.Uint64(b[tr:])
	binary.LittleEndian.PutUint64(b[tr:], w|0xFFFF0000|0xC004)
	if got := FEDCRC(b); got != want {
		t.Fatalf("CRC changed to 0x%04X (was 0x%04X) when C, F, R and the CRC field were set", got, want)
	}
	binary.LittleEndian.PutUint64(b[tr:], w|1<<8) // Evt_stat is covered
	if FEDCRC(b) == want {
		t.Fatal("CRC did not change when Evt_stat changed")
	}
}

// TestFEDCRCSlicedMatchesBitwise checks the word-at-a-time FEDCRC against
// the bitwise CRC of the MSB-first byte stream on random fragments.
func TestFEDCRCSlicedMatchesBitwise(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for words := 2; words < 40; words++ {
		frag := make([]byte, 8*words)
		for i := range frag {
			frag[i] = byte(r.Uint32())
		}
		stream := make([]byte, 0, len(frag))
		for i := 0; i < words; i++ {
			w := binary.LittleEndian.Uint64(frag[8*i:])
			if i == words-1 {
				w &= crcZeroMask
			}
			stream = binary.BigEndian.AppendUint64(stream, w)
		}
		if got, want := FEDCRC(frag), crc16Bitwise(stream); got != want {
			t.Fatalf("%d words: FEDCRC 0x%04X, bitwise 0x%04X", words, got, want)
		}
	}
}
