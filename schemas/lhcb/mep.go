package lhcb

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-daq/sluice/schemas"
)

// The multi-event packet (MEP) of the Allen 2019–2023 event builder
// (Allen mdf/include/eb_header.hpp), as found in the .mep sample: the body
// of an MDF record of data type 2. Little-endian.
//
//	MEP header:
//	| off       | size  | field                                                   |
//	|-----------|-------|---------------------------------------------------------|
//	|   0       |     2 | n_blocks (one block per readout source)                 |
//	|   2       |     2 | packing_factor: events in the MEP                       |
//	|   4       |     4 | reserved                                                |
//	|   8       |     8 | mep_size: bytes after the MEP header (all the blocks)   |
//	|  16       |   2n  | source_ids[n], padded to 4 bytes                        |
//	|  ..       |   2n  | versions[n] (bank versions), padded to 4 bytes          |
//	|  ..       |   4n  | offsets[n]: of block i, counted from the END of the     |
//	|           |       | MEP header (not from the start of the MEP)              |
//
//	Block (at header end + offsets[i]):
//	| 0         |     8 | event_id                                                |
//	| 8         |     2 | n_frag (= packing_factor)                               |
//	| 10        |     2 | reserved                                                |
//	| 12        |     4 | block_size: fragment bytes after the block header       |
//	| 16        |  n_f  | types[n_frag] (bank types, u8), padded to 4 bytes       |
//	| ..        | 2n_f  | sizes[n_frag] (u16), padded to 4 bytes                  |
//	| ..        |       | the fragments back to back, unpadded                    |
//
// Fragment k of every block belongs to event k of the MEP; a fragment is
// the payload of one raw bank of the block's source (the 8-byte bank header
// is not stored).
const (
	mepBaseSize   = 16
	blockBaseSize = 16
	formatMEP     = "mep"
)

// MEP is a decoded multi-event packet. Decoded fragments alias the buffer.
type MEP struct {
	PackingFactor int
	Reserved      uint32
	Blocks        []MEPBlock
}

// MEPBlock is one source's block: fragment k is the bank of type Types[k]
// of that source in event k.
type MEPBlock struct {
	SourceID  uint16
	Version   uint16 // bank version of the source's banks
	EventID   uint64
	Reserved  uint16
	Types     []uint8  // one bank type per fragment
	Fragments [][]byte // one payload per fragment
}

func pad4(n int) int { return (n + 3) &^ 3 }

// mepHeaderLen is the MEP header size for n blocks.
func mepHeaderLen(n int) int { return mepBaseSize + 2*pad4(2*n) + 4*n }

// DecodeMEP decodes one MEP (the body of a data type 2 MDF record). It
// checks that mep_size covers exactly the bytes after the header, that every
// block lies inside them, holds packing_factor fragments and that its
// fragment sizes add up to its block_size, and that every version fits a
// raw bank's 8 bits. Errors: *schemas.DecodeError
// (offsets from the start of b) wrapping ErrTruncated, ErrBadHeader,
// ErrSizeOverflow or ErrInconsistent.
func DecodeMEP(b []byte) (*MEP, error) {
	le := binary.LittleEndian
	if len(b) < mepBaseSize {
		return nil, schemas.Errorf(formatMEP, "header", 0, schemas.ErrTruncated, "need %d bytes, have %d", mepBaseSize, len(b))
	}
	n, pf := int(le.Uint16(b)), int(le.Uint16(b[2:]))
	if n == 0 {
		return nil, schemas.Errorf(formatMEP, "n_blocks", 0, schemas.ErrBadHeader, "no blocks")
	}
	if pf == 0 {
		return nil, schemas.Errorf(formatMEP, "packing_factor", 2, schemas.ErrBadHeader, "packing factor 0")
	}
	hl := mepHeaderLen(n)
	if len(b) < hl {
		return nil, schemas.Errorf(formatMEP, "header", mepBaseSize, schemas.ErrTruncated, "%d blocks need a %d-byte header, have %d bytes", n, hl, len(b))
	}
	if size := le.Uint64(b[8:]); size != uint64(len(b)-hl) {
		if size > uint64(len(b)-hl) {
			return nil, schemas.Errorf(formatMEP, "mep_size", 8, schemas.ErrTruncated, "mep_size %d, have %d bytes after the header", size, len(b)-hl)
		}
		return nil, schemas.Errorf(formatMEP, "mep_size", 8, schemas.ErrInconsistent, "mep_size %d, but %d bytes follow the header", size, len(b)-hl)
	}
	srcAt, verAt, offAt := mepBaseSize, mepBaseSize+pad4(2*n), mepBaseSize+2*pad4(2*n)
	m := &MEP{PackingFactor: pf, Reserved: le.Uint32(b[4:]), Blocks: make([]MEPBlock, n)}
	frags := make([][]byte, n*pf)
	bhl := blockBaseSize + pad4(pf) + pad4(2*pf)
	for i := range m.Blocks {
		field := int64(offAt + 4*i)
		o := uint64(hl) + uint64(le.Uint32(b[offAt+4*i:]))
		if o+uint64(bhl) > uint64(len(b)) {
			return nil, schemas.Errorf(formatMEP, fmt.Sprintf("offsets[%d]", i), field, schemas.ErrSizeOverflow, "block at byte %d with its %d-byte header passes the end (%d)", o, bhl, len(b))
		}
		at := int(o)
		blk := b[at:]
		if nf := int(le.Uint16(blk[8:])); nf != pf {
			return nil, schemas.Errorf(formatMEP, fmt.Sprintf("block[%d].n_frag", i), int64(at+8), schemas.ErrInconsistent, "n_frag %d, packing factor %d", nf, pf)
		}
		bs := int(le.Uint32(blk[12:]))
		if bs > len(b)-at-bhl {
			return nil, schemas.Errorf(formatMEP, fmt.Sprintf("block[%d].block_size", i), int64(at+12), schemas.ErrSizeOverflow, "block_size %d, %d bytes left", bs, len(b)-at-bhl)
		}
		blkFrags := frags[i*pf : (i+1)*pf : (i+1)*pf]
		sizesAt := blockBaseSize + pad4(pf)
		off := bhl
		for k := range blkFrags {
			// Invariant: off <= bhl+bs, so every fragment so far lies inside the block.
			sz := int(le.Uint16(blk[sizesAt+2*k:]))
			if off+sz > bhl+bs {
				return nil, schemas.Errorf(formatMEP, fmt.Sprintf("block[%d].sizes[%d]", i, k), int64(at+sizesAt+2*k), schemas.ErrInconsistent, "fragment sizes exceed block_size %d", bs)
			}
			blkFrags[k] = blk[off : off+sz : off+sz]
			off += sz
		}
		if off != bhl+bs {
			return nil, schemas.Errorf(formatMEP, fmt.Sprintf("block[%d].block_size", i), int64(at+12), schemas.ErrInconsistent, "block_size %d, fragment sizes add up to %d", bs, off-bhl)
		}
		ver := le.Uint16(b[verAt+2*i:])
		if ver > 0xFF {
			return nil, schemas.Errorf(formatMEP, fmt.Sprintf("versions[%d]", i), int64(verAt+2*i), schemas.ErrBadHeader, "bank version %d does not fit a raw bank's 8-bit version", ver)
		}
		m.Blocks[i] = MEPBlock{
			SourceID:  le.Uint16(b[srcAt+2*i:]),
			Version:   ver,
			EventID:   le.Uint64(blk),
			Reserved:  le.Uint16(blk[10:]),
			Types:     blk[blockBaseSize : blockBaseSize+pf : blockBaseSize+pf],
			Fragments: blkFrags,
		}
	}
	return m, nil
}

// Event appends to dst the raw banks of event k (0 <= k < PackingFactor):
// fragment k of every block, in block order, as banks whose payload aliases
// the MEP, with the block's version. Every
// block gives a bank, including the fragments the sample uses to say "no
// bank of this source in this event" (size 0, type 0): they are kept as
// they are, not interpreted.
func (m *MEP) Event(k int, dst []Bank) []Bank {
	for i := range m.Blocks {
		blk := &m.Blocks[i]
		dst = append(dst, Bank{Type: blk.Types[k], Version: uint8(blk.Version), SourceID: blk.SourceID, Data: blk.Fragments[k]})
	}
	return dst
}

// AppendMEP appends m in the MEP layout to dst, with the blocks in order
// and back to back. Every block must hold PackingFactor types and
// fragments of at most 65535 bytes; at most 65535 blocks.
func AppendMEP(dst []byte, m *MEP) ([]byte, error) {
	n, pf := len(m.Blocks), m.PackingFactor
	if n < 1 || n > 0xFFFF || pf < 1 || pf > 0xFFFF {
		return dst, fmt.Errorf("mep: %d blocks and packing factor %d, want 1..65535 each", n, pf)
	}
	le := binary.LittleEndian
	hl := mepHeaderLen(n)
	bhl := blockBaseSize + pad4(pf) + pad4(2*pf)
	start := len(dst)
	dst = append(dst, make([]byte, hl)...)
	h := dst[start:]
	le.PutUint16(h, uint16(n))
	le.PutUint16(h[2:], uint16(pf))
	le.PutUint32(h[4:], m.Reserved)
	srcAt, verAt, offAt := mepBaseSize, mepBaseSize+pad4(2*n), mepBaseSize+2*pad4(2*n)
	for i := range m.Blocks {
		blk := &m.Blocks[i]
		if len(blk.Types) != pf || len(blk.Fragments) != pf {
			return dst[:start], fmt.Errorf("mep: block %d has %d types and %d fragments, packing factor %d", i, len(blk.Types), len(blk.Fragments), pf)
		}
		o := len(dst) - start - hl
		if uint64(o) > 0xFFFFFFFF {
			return dst[:start], fmt.Errorf("mep: block %d starts beyond the 32-bit offset range", i)
		}
		h = dst[start:]
		le.PutUint16(h[srcAt+2*i:], blk.SourceID)
		le.PutUint16(h[verAt+2*i:], blk.Version)
		le.PutUint32(h[offAt+4*i:], uint32(o))
		at := len(dst)
		dst = append(dst, make([]byte, bhl)...)
		bh := dst[at:]
		le.PutUint64(bh, blk.EventID)
		le.PutUint16(bh[8:], uint16(pf))
		le.PutUint16(bh[10:], blk.Reserved)
		copy(bh[blockBaseSize:], blk.Types)
		size := 0
		for k, f := range blk.Fragments {
			if len(f) > 0xFFFF {
				return dst[:start], fmt.Errorf("mep: block %d fragment %d has %d bytes, max 65535", i, k, len(f))
			}
			le.PutUint16(bh[blockBaseSize+pad4(pf)+2*k:], uint16(len(f)))
			size += len(f)
		}
		le.PutUint32(bh[12:], uint32(size))
		for _, f := range blk.Fragments {
			dst = append(dst, f...)
		}
	}
	le.PutUint64(dst[start+8:], uint64(len(dst)-start-hl))
	return dst, nil
}
