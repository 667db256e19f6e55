package schemas

import (
	"encoding/binary"
	"math"
)

// Multi-fragment packet layout constants (see the package doc for the table).
const (
	MFPMagic      uint32 = 0x504D4C53 // "SLMP" on the wire
	MFPVersion    uint8  = 1
	MFPHeaderSize        = 32
	// MaxPacking bounds n so that a hostile header cannot make a reader
	// reserve gigabytes for the size arrays.
	MaxPacking = 1 << 16
	// MaxAlign bounds the payload alignment exponent (4 KiB pages).
	MaxAlign = 12
)

// MFP is a decoded multi-fragment packet: a view over the buffer it was
// decoded from. Nothing is copied or allocated per fragment.
type MFP struct {
	SourceID     uint32
	FirstEventID uint64
	Flags        FragmentFlag
	Align        uint8 // payloads padded to 2^Align bytes
	N            int   // packing factor
	buf          []byte
	payloadStart int
}

// Bytes returns the whole encoded packet.
func (p *MFP) Bytes() []byte { return p.buf }

// Size returns the payload size in bytes of fragment i (0 <= i < N).
func (p *MFP) Size(i int) int {
	return int(binary.LittleEndian.Uint32(p.buf[MFPHeaderSize+4*i:]))
}

// CRC returns the CRC-32C the source sent for fragment i.
func (p *MFP) CRC(i int) uint32 {
	return binary.LittleEndian.Uint32(p.buf[MFPHeaderSize+4*p.N+4*i:])
}

// Fragments calls fn for each fragment in order with its index, event id,
// CRC and payload (aliasing the packet buffer), stopping early when fn
// returns false. It allocates nothing.
func (p *MFP) Fragments(fn func(i int, eventID uint64, crc uint32, payload []byte) bool) {
	off := p.payloadStart
	pad := 1<<p.Align - 1
	for i := 0; i < p.N; i++ {
		// Invariant (checked by DecodeMFP): off+size <= len(buf) for every i.
		sz := p.Size(i)
		if !fn(i, p.FirstEventID+uint64(i), p.CRC(i), p.buf[off:off+sz:off+sz]) {
			return
		}
		off += (sz + pad) &^ pad
	}
}

// MFPLen returns the encoded size of a packet with the given payload sizes.
func MFPLen(sizes []int, align uint8) int {
	pad := 1<<align - 1
	n := (MFPHeaderSize + 8*len(sizes) + pad) &^ pad
	for _, s := range sizes {
		n += (s + pad) &^ pad
	}
	return n
}

// AppendMFP appends a multi-fragment packet for one source to dst: payloads
// belong to event ids first, first+1, ... Each fragment's CRC-32C is
// computed unless crcs is non-nil, in which case crcs[i] is written as is
// (fault injection). Panics only on caller bugs: len(payloads) outside
// 1..MaxPacking, align > MaxAlign, or a packet over 4 GiB.
func AppendMFP(dst []byte, source uint32, first uint64, flags FragmentFlag, align uint8, payloads [][]byte, crcs []uint32) []byte {
	n := len(payloads)
	if n < 1 || n > MaxPacking || align > MaxAlign {
		panic("schemas.AppendMFP: packing factor or alignment out of range")
	}
	sizes := make([]int, n)
	for i, p := range payloads {
		sizes[i] = len(p)
	}
	total := MFPLen(sizes, align)
	if total > math.MaxUint32 {
		panic("schemas.AppendMFP: packet over 4 GiB")
	}
	start := len(dst)
	dst = append(dst, make([]byte, total)...)
	b := dst[start:]
	le := binary.LittleEndian
	le.PutUint32(b[0:], MFPMagic)
	b[4] = MFPVersion
	b[5] = align
	le.PutUint16(b[6:], uint16(flags))
	le.PutUint32(b[8:], source)
	le.PutUint32(b[12:], uint32(n))
	le.PutUint64(b[16:], first)
	le.PutUint32(b[24:], uint32(total))
	pad := 1<<align - 1
	off := (MFPHeaderSize + 8*n + pad) &^ pad
	for i, p := range payloads {
		le.PutUint32(b[MFPHeaderSize+4*i:], uint32(len(p)))
		crc := uint32(0)
		if crcs != nil {
			crc = crcs[i]
		} else {
			crc = Checksum(p)
		}
		le.PutUint32(b[MFPHeaderSize+4*n+4*i:], crc)
		copy(b[off:], p)
		off += (len(p) + pad) &^ pad
	}
	return dst
}

// DecodeMFP validates the multi-fragment packet at the start of b and
// returns a view of it and the bytes it occupies (packet_size). Fragment CRCs
// are not verified (see Fragment.CRCValid). Errors: *DecodeError wrapping
// ErrTruncated, ErrBadMagic, ErrBadVersion, ErrBadHeader, ErrSizeOverflow or
// ErrInconsistent (sizes that do not add up to packet_size).
func DecodeMFP(b []byte) (MFP, int, error) {
	const format = "mfp"
	le := binary.LittleEndian
	if len(b) < MFPHeaderSize {
		return MFP{}, 0, Errorf(format, "header", 0, ErrTruncated, "need %d bytes, have %d", MFPHeaderSize, len(b))
	}
	if m := le.Uint32(b); m != MFPMagic {
		return MFP{}, 0, Errorf(format, "magic", 0, ErrBadMagic, "want 0x%08x, have 0x%08x", MFPMagic, m)
	}
	if b[4] != MFPVersion {
		return MFP{}, 0, Errorf(format, "version", 4, ErrBadVersion, "want %d, have %d", MFPVersion, b[4])
	}
	align := b[5]
	if align > MaxAlign {
		return MFP{}, 0, Errorf(format, "align", 5, ErrBadHeader, "want <= %d, have %d", MaxAlign, align)
	}
	n := le.Uint32(b[12:])
	if n < 1 || n > MaxPacking {
		return MFP{}, 0, Errorf(format, "n", 12, ErrBadHeader, "packing factor must be 1..%d, have %d", MaxPacking, n)
	}
	size := uint64(le.Uint32(b[24:]))
	pad := uint64(1)<<align - 1
	payloadStart := (MFPHeaderSize + 8*uint64(n) + pad) &^ pad
	if size < payloadStart {
		return MFP{}, 0, Errorf(format, "packet_size", 24, ErrInconsistent, "packet_size %d is smaller than header and arrays (%d bytes) for n=%d", size, payloadStart, n)
	}
	if size > uint64(len(b)) {
		return MFP{}, 0, Errorf(format, "packet", 0, ErrTruncated, "packet_size %d, have %d bytes", size, len(b))
	}
	// Sum the padded sizes in 64 bits: n <= 2^16 values < 2^32 cannot overflow.
	end := payloadStart
	for i := uint64(0); i < uint64(n); i++ {
		end += (uint64(le.Uint32(b[MFPHeaderSize+4*i:])) + pad) &^ pad
		if end > size {
			return MFP{}, 0, Errorf(format, "sizes", int64(MFPHeaderSize+4*i), ErrSizeOverflow, "fragment %d ends at byte %d, past packet_size %d", i, end, size)
		}
	}
	if end != size {
		return MFP{}, 0, Errorf(format, "packet_size", 24, ErrInconsistent, "fragments end at byte %d, packet_size is %d", end, size)
	}
	p := MFP{
		SourceID:     le.Uint32(b[8:]),
		FirstEventID: le.Uint64(b[16:]),
		Flags:        FragmentFlag(le.Uint16(b[6:])),
		Align:        align,
		N:            int(n),
		buf:          b[:size:size],
		payloadStart: int(payloadStart),
	}
	return p, int(size), nil
}
