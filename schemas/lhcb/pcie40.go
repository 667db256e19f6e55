package lhcb

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-daq/sluice/schemas"
)

// PCIe40MFP is the Run 3 LHCb multi-fragment packet sent by a PCIe40
// readout board. PROVISIONAL: the layout (the table below) is taken from a public implementation and not checked against LHCb
// Online's own header, and no real sample exists; the tests only check it
// against that table. Little-endian, 20-byte header:
//
//	| off | size | field                                                 |
//	|-----|------|-------------------------------------------------------|
//	|   0 |    2 | magic 0x40CE (bytes CE 40)                            |
//	|   2 |    2 | n_banks: fragments (the packing factor)               |
//	|   4 |    4 | packet_size: bytes including the header               |
//	|   8 |    8 | ev_id of fragment 0 (fragment i has ev_id + i)        |
//	|  16 |    2 | src_id                                                |
//	|  18 |    1 | align: fragments padded to 2^align bytes              |
//	|  19 |    1 | block/fragment version                                |
//	|  20 |    n | bank types (u8), padded to 4 bytes                    |
//	|  .. |   2n | bank sizes (u16, payload bytes), padded to 4 bytes    |
//	|  .. |      | fragments, each padded to 2^align bytes               |
type PCIe40MFP struct {
	EventID   uint64 // of fragment 0
	SourceID  uint16
	Align     uint8 // fragments padded to 2^Align bytes; this package accepts 0..PCIe40MaxAlign
	Version   uint8
	Types     []uint8  // bank type of each fragment
	Fragments [][]byte // payloads (aliasing the packet when decoded)
}

// PCIe40MFPMagic opens every PCIe40 MFP.
const PCIe40MFPMagic uint16 = 0x40CE

// PCIe40 MFP sizes (untyped, so they combine with int lengths) and format name.
const (
	PCIe40MFPHeaderSize = 20
	// PCIe40MaxAlign bounds the alignment exponent (4 KiB), so that a
	// corrupt header cannot ask for absurd padding.
	PCIe40MaxAlign = 12

	formatPCIe40 = "pcie40-mfp"
)

// DecodePCIe40MFP decodes the packet at the start of b and returns it with
// packet_size. Errors: *schemas.DecodeError (offsets from the start of b)
// wrapping ErrTruncated, ErrBadMagic, ErrBadHeader (no fragments, align
// too large), ErrSizeOverflow (fragments past packet_size) or
// ErrInconsistent (packet_size smaller than the arrays or larger than the
// fragments).
func DecodePCIe40MFP(b []byte) (PCIe40MFP, int, error) {
	le := binary.LittleEndian
	if len(b) < PCIe40MFPHeaderSize {
		return PCIe40MFP{}, 0, schemas.Errorf(formatPCIe40, "header", 0, schemas.ErrTruncated, "need %d bytes, have %d", PCIe40MFPHeaderSize, len(b))
	}
	if m := le.Uint16(b); m != PCIe40MFPMagic {
		return PCIe40MFP{}, 0, schemas.Errorf(formatPCIe40, "magic", 0, schemas.ErrBadMagic, "want %#04x, have %#04x", PCIe40MFPMagic, m)
	}
	n := int(le.Uint16(b[2:]))
	if n == 0 {
		return PCIe40MFP{}, 0, schemas.Errorf(formatPCIe40, "n_banks", 2, schemas.ErrBadHeader, "no fragments")
	}
	align := b[18]
	if align > PCIe40MaxAlign {
		return PCIe40MFP{}, 0, schemas.Errorf(formatPCIe40, "align", 18, schemas.ErrBadHeader, "align %d, accept 0..%d", align, PCIe40MaxAlign)
	}
	size := int(le.Uint32(b[4:]))
	sizesAt := PCIe40MFPHeaderSize + pad4(n)
	dataAt := sizesAt + pad4(2*n)
	if size < dataAt {
		return PCIe40MFP{}, 0, schemas.Errorf(formatPCIe40, "packet_size", 4, schemas.ErrInconsistent, "packet_size %d is smaller than header and arrays (%d bytes) for %d fragments", size, dataAt, n)
	}
	if size > len(b) {
		return PCIe40MFP{}, 0, schemas.Errorf(formatPCIe40, "packet", 0, schemas.ErrTruncated, "packet_size %d, have %d bytes", size, len(b))
	}
	p := PCIe40MFP{
		EventID:   le.Uint64(b[8:]),
		SourceID:  le.Uint16(b[16:]),
		Align:     align,
		Version:   b[19],
		Types:     b[PCIe40MFPHeaderSize : PCIe40MFPHeaderSize+n : PCIe40MFPHeaderSize+n],
		Fragments: make([][]byte, n),
	}
	mask := 1<<align - 1
	off := dataAt
	for i := range p.Fragments {
		// Invariant: off <= size, every earlier fragment lies inside the packet.
		sz := int(le.Uint16(b[sizesAt+2*i:]))
		if off+sz > size {
			return PCIe40MFP{}, 0, schemas.Errorf(formatPCIe40, fmt.Sprintf("sizes[%d]", i), int64(sizesAt+2*i), schemas.ErrSizeOverflow, "fragment %d ends at byte %d, past packet_size %d", i, off+sz, size)
		}
		p.Fragments[i] = b[off : off+sz : off+sz]
		off = min(off+(sz+mask)&^mask, size)
	}
	if end := pcie40Len(p.Fragments, align); end != size {
		return PCIe40MFP{}, 0, schemas.Errorf(formatPCIe40, "packet_size", 4, schemas.ErrInconsistent, "fragments end at byte %d, packet_size is %d", end, size)
	}
	return p, size, nil
}

// pcie40Len is the encoded size of a packet of these fragments.
func pcie40Len(frags [][]byte, align uint8) int {
	mask := 1<<align - 1
	n := PCIe40MFPHeaderSize + pad4(len(frags)) + pad4(2*len(frags))
	for _, f := range frags {
		n += (len(f) + mask) &^ mask
	}
	return n
}

// AppendPCIe40MFP appends p in the PCIe40 MFP layout to dst. It fails when
// p has no fragments or more than 65535, a fragment over 65535 bytes, types
// and fragments of different lengths, Align above PCIe40MaxAlign or a packet
// over 4 GiB.
func AppendPCIe40MFP(dst []byte, p *PCIe40MFP) ([]byte, error) {
	n := len(p.Fragments)
	if n < 1 || n > 0xFFFF || len(p.Types) != n || p.Align > PCIe40MaxAlign {
		return dst, fmt.Errorf("pcie40-mfp: %d fragments, %d types, align %d: want 1..65535 of each, equal, align <= %d", n, len(p.Types), p.Align, PCIe40MaxAlign)
	}
	total := pcie40Len(p.Fragments, p.Align)
	if uint64(total) > 0xFFFFFFFF {
		return dst, fmt.Errorf("pcie40-mfp: packet of %d bytes exceeds 4 GiB", total)
	}
	le := binary.LittleEndian
	start := len(dst)
	dst = append(dst, make([]byte, total)...)
	b := dst[start:]
	le.PutUint16(b, PCIe40MFPMagic)
	le.PutUint16(b[2:], uint16(n))
	le.PutUint32(b[4:], uint32(total))
	le.PutUint64(b[8:], p.EventID)
	le.PutUint16(b[16:], p.SourceID)
	b[18], b[19] = p.Align, p.Version
	copy(b[PCIe40MFPHeaderSize:], p.Types)
	sizesAt := PCIe40MFPHeaderSize + pad4(n)
	off := sizesAt + pad4(2*n)
	mask := 1<<p.Align - 1
	for i, f := range p.Fragments {
		if len(f) > 0xFFFF {
			return dst[:start], fmt.Errorf("pcie40-mfp: fragment %d has %d bytes, max 65535", i, len(f))
		}
		le.PutUint16(b[sizesAt+2*i:], uint16(len(f)))
		copy(b[off:], f)
		off += (len(f) + mask) &^ mask
	}
	return dst, nil
}
