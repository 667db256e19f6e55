package cms

import (
	"encoding/binary"
	"errors"
	"io"

	"github.com/sluice-daq/sluice/schemas"
)

// FEROL framing (the CMS FEROL -> DAQ TCP stream, Run 2-3). The FEROL
// cuts each FED fragment into blocks of at most FEROLBlockSize bytes and
// sends them over TCP, each after a 16-byte header of two 64-bit words in
// BIG-endian byte order (the FED data itself stays little-endian):
//
//	word 0: 63:48 signature 0x475A ("GZ") | 31 first block of the fragment
//	        | 30 last block | 9:0 payload length in 64-bit words
//	word 1: 43:32 FED id | 23:0 event number (the FED's LV1 counter)
//
// Other bits are reserved (0 as the FEROL writes them). The payloads of a
// first..last run of blocks, concatenated, are one FED fragment (header
// word to trailer word).
const (
	FEROLHeaderSize = 16
	FEROLSignature  = 0x475A
	// FEROLBlockSize is the largest block, header included (CMS evb's
	// FEROL_BLOCK_SIZE): the FEROL fills blocks to it, so a fragment
	// takes ceil(size / FEROLMaxPayload) blocks.
	FEROLBlockSize  = 4096
	FEROLMaxPayload = FEROLBlockSize - FEROLHeaderSize
	// ferolMaxEvent is the largest 24-bit event number.
	ferolMaxEvent = 1<<24 - 1
)

const ferolFormat = "cms-ferol"

// FEROLBlock is one decoded FEROL block header.
type FEROLBlock struct {
	First, Last bool
	Words       uint16 // payload length, 64-bit words (10 bits)
	FEDID       uint16 // 12 bits
	Event       uint32 // 24 bits
	// Reserved says that a reserved bit is set: the block is not as the
	// FEROL writes it, and a rewrite (AppendFEROL) clears the bit.
	Reserved bool
}

// DecodeFEROLBlock decodes the 16-byte block header at the start of b.
// Errors: *schemas.DecodeError wrapping ErrTruncated (under 16 bytes),
// ErrBadMagic (signature) or ErrSizeOverflow (a payload of 0 words or over
// FEROLMaxPayload bytes, which no FEROL sends).
func DecodeFEROLBlock(b []byte) (FEROLBlock, error) {
	if len(b) < FEROLHeaderSize {
		return FEROLBlock{}, schemas.Errorf(ferolFormat, "block header", 0, schemas.ErrTruncated, "need %d bytes, have %d", FEROLHeaderSize, len(b))
	}
	be := binary.BigEndian
	w0, w1 := be.Uint64(b), be.Uint64(b[8:])
	if s := w0 >> 48; s != FEROLSignature {
		return FEROLBlock{}, schemas.Errorf(ferolFormat, "block header.signature", 0, schemas.ErrBadMagic, "want 0x%04x, have 0x%04x", FEROLSignature, s)
	}
	h := FEROLBlock{
		First: w0&(1<<31) != 0, Last: w0&(1<<30) != 0, Words: uint16(w0 & 0x3FF),
		FEDID: uint16(w1 >> 32 & MaxFEDID), Event: uint32(w1 & ferolMaxEvent),
		Reserved: w0&^(0xFFFF<<48|3<<30|0x3FF) != 0 || w1&^(MaxFEDID<<32|ferolMaxEvent) != 0,
	}
	if h.Words == 0 || int(h.Words)*FEDWordSize > FEROLMaxPayload {
		return FEROLBlock{}, schemas.Errorf(ferolFormat, "block header.length", 6, schemas.ErrSizeOverflow, "%d payload words, want 1..%d", h.Words, FEROLMaxPayload/FEDWordSize)
	}
	return h, nil
}

// AppendFEROLHeader appends the 16-byte header of h to dst, reserved bits
// zero. Fields wider than their bit fields are truncated (callers check).
func AppendFEROLHeader(dst []byte, h FEROLBlock) []byte {
	be := binary.BigEndian
	w0 := uint64(FEROLSignature)<<48 | bit(h.First, 31) | bit(h.Last, 30) | uint64(h.Words&0x3FF)
	w1 := uint64(h.FEDID&MaxFEDID)<<32 | uint64(h.Event&ferolMaxEvent)
	return be.AppendUint64(be.AppendUint64(dst, w0), w1)
}

// AppendFEROL appends the FED fragment fed framed as the FEROL sends it:
// blocks of FEROLMaxPayload bytes (the last one shorter), first and last
// bits set, FED id fedID and event number event (its low 24 bits) in every
// header. Errors: fed not a whole number of 64-bit words or empty, a FED
// id over 12 bits.
func AppendFEROL(dst []byte, fedID uint16, event uint32, fed []byte) ([]byte, error) {
	if len(fed) == 0 || len(fed)%FEDWordSize != 0 {
		return dst, schemas.Errorf(ferolFormat, "fragment", 0, schemas.ErrBadHeader, "FED %d: %d bytes is not a whole, non-zero number of 64-bit words", fedID, len(fed))
	}
	if fedID > MaxFEDID {
		return dst, schemas.Errorf(ferolFormat, "fragment", 0, schemas.ErrBadHeader, "FED id %d is over 12 bits", fedID)
	}
	for off := 0; off < len(fed); off += FEROLMaxPayload {
		end := min(off+FEROLMaxPayload, len(fed))
		dst = AppendFEROLHeader(dst, FEROLBlock{First: off == 0, Last: end == len(fed), Words: uint16((end - off) / FEDWordSize), FEDID: fedID, Event: event & ferolMaxEvent})
		dst = append(dst, fed[off:end]...)
	}
	return dst, nil
}

// FEROLFragment is one FED fragment read from a FEROL stream.
type FEROLFragment struct {
	FEDID  uint16 // from the block headers
	Event  uint32 // event number, from the block headers (24 bits)
	Offset int64  // of its first block header in the stream
	Blocks int
	// Canonical says that the blocks are as AppendFEROL writes them
	// (full blocks, reserved bits zero): re-framing the fragment gives
	// the stream's bytes back.
	Canonical bool
	// Data is the FED fragment (the blocks' payloads concatenated); it is
	// valid until the next call of Next.
	Data []byte
	// sizes are the blocks' payload sizes, for StreamOffset.
	sizes []int
}

// StreamOffset maps a byte offset in f.Data to the stream offset of that
// byte (past the block headers before it).
func (f *FEROLFragment) StreamOffset(off int64) int64 {
	at := f.Offset
	for _, n := range f.sizes {
		at += FEROLHeaderSize
		if off < int64(n) {
			break
		}
		off -= int64(n)
		at += int64(n)
	}
	return at + off
}

// FEROLReader reads the FED fragments of a FEROL stream.
type FEROLReader struct {
	// MaxFragment, when > 0, is the largest FED fragment taken, bytes: a
	// stream whose blocks add up to more before a last block is refused
	// (ErrSizeOverflow) rather than buffered without end.
	MaxFragment int

	r     io.Reader
	off   int64
	buf   []byte
	sizes []int
	hdr   [FEROLHeaderSize]byte
}

// NewFEROLReader returns a reader of the FEROL stream r.
func NewFEROLReader(r io.Reader) *FEROLReader { return &FEROLReader{r: r} }

// Offset is the stream offset of the next block.
func (fr *FEROLReader) Offset() int64 { return fr.off }

// Next returns the next fragment, io.EOF at the stream's end (between
// fragments). The FED fragment in it is not decoded (see DecodeFED).
// Errors, *schemas.DecodeError at the stream offset of the block:
// those of DecodeFEROLBlock, ErrTruncated (the stream ends inside a block
// or fragment), ErrInconsistent (a first block without the first bit, a
// first bit inside a fragment, or a block whose FED id or event number
// differs from its fragment's first block).
func (fr *FEROLReader) Next() (FEROLFragment, error) {
	f := FEROLFragment{Offset: fr.off, Canonical: true}
	fr.buf, fr.sizes = fr.buf[:0], fr.sizes[:0]
	for {
		at := fr.off
		n, err := io.ReadFull(fr.r, fr.hdr[:])
		if err != nil {
			if err == io.EOF && f.Blocks == 0 {
				return f, io.EOF
			}
			if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
				return f, schemas.Errorf(ferolFormat, "block header", at, schemas.ErrTruncated, "the stream ends %d bytes into a block header (fragment at %d, %d blocks read)", n, f.Offset, f.Blocks)
			}
			return f, err
		}
		h, err := DecodeFEROLBlock(fr.hdr[:])
		if err != nil {
			return f, schemas.WithOffset(err, at)
		}
		switch {
		case f.Blocks == 0 && !h.First:
			return f, schemas.Errorf(ferolFormat, "block header.first", at+4, schemas.ErrInconsistent, "FED %d event %d: a fragment's first block lacks the first-block bit", h.FEDID, h.Event)
		case f.Blocks > 0 && h.First:
			return f, schemas.Errorf(ferolFormat, "block header.first", at+4, schemas.ErrInconsistent, "FED %d event %d: a new fragment starts before block %d of the previous one had the last-block bit", h.FEDID, h.Event, f.Blocks)
		case f.Blocks == 0:
			f.FEDID, f.Event = h.FEDID, h.Event
		case h.FEDID != f.FEDID || h.Event != f.Event:
			return f, schemas.Errorf(ferolFormat, "block header", at+8, schemas.ErrInconsistent, "block %d of FED %d event %d says FED %d event %d", f.Blocks, f.FEDID, f.Event, h.FEDID, h.Event)
		}
		size := int(h.Words) * FEDWordSize
		l := len(fr.buf)
		if fr.MaxFragment > 0 && l+size > fr.MaxFragment {
			return f, schemas.Errorf(ferolFormat, "block header.length", at+6, schemas.ErrSizeOverflow, "FED %d event %d: block %d takes the fragment to %d bytes, over the %d taken", f.FEDID, f.Event, f.Blocks, l+size, fr.MaxFragment)
		}
		fr.buf = append(fr.buf, make([]byte, size)...)
		if m, err := io.ReadFull(fr.r, fr.buf[l:]); err != nil {
			if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
				return f, schemas.Errorf(ferolFormat, "block payload", at+FEROLHeaderSize, schemas.ErrTruncated, "block of %d bytes, the stream ends after %d", size, m)
			}
			return f, err
		}
		fr.off = at + FEROLHeaderSize + int64(size)
		f.Blocks++
		fr.sizes = append(fr.sizes, size)
		if h.Reserved || (!h.Last && size != FEROLMaxPayload) {
			f.Canonical = false
		}
		if h.Last {
			f.Data, f.sizes = fr.buf, fr.sizes
			return f, nil
		}
	}
}
