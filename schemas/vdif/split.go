package vdif

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/sluice-daq/sluice/schemas"
)

// SourceID is the sluice source id of a VDIF thread: (station id << 10) |
// thread id, so threads of different stations never collide. It fits in 26
// bits.
func SourceID(h *Header) uint32 { return uint32(h.StationID)<<10 | uint32(h.ThreadID) }

// SplitSourceID is the inverse of SourceID.
func SplitSourceID(src uint32) (station, thread uint16) {
	return uint16(src >> 10), uint16(src & 0x3ff)
}

// EventID is the sluice event id of a VDIF frame:
// (reference epoch << 56) | (seconds << 24) | frame number. Every thread's
// frame for the same instant gets the same id, and ids grow with time within
// a stream (a later epoch sorts after an earlier one). Ids are consecutive
// only within a second: the frame number restarts at 0 each second.
func EventID(h *Header) uint64 {
	return uint64(h.RefEpoch)<<56 | uint64(h.Seconds)<<24 | uint64(h.FrameNumber)
}

// SplitEventID is the inverse of EventID.
func SplitEventID(id uint64) (epoch uint8, seconds, frame uint32) {
	return uint8(id >> 56 & 0x3f), uint32(id >> 24 & (1<<30 - 1)), uint32(id & 0xffffff)
}

// FrameFragment turns one VDIF frame into a sluice fragment: source
// SourceID, event EventID, payload the whole frame (header included, so a
// joiner rebuilds it byte for byte; aliases f.Bytes) with its CRC-32C. A
// frame flagged invalid by its source gets schemas.FlagSourceError.
func FrameFragment(f *Frame) schemas.Fragment {
	var flags schemas.FragmentFlag
	if f.Header.Invalid {
		flags = schemas.FlagSourceError
	}
	return schemas.Fragment{
		SourceID: SourceID(&f.Header),
		EventID:  EventID(&f.Header),
		Flags:    flags,
		CRC:      schemas.Checksum(f.Bytes),
		Payload:  f.Bytes,
	}
}

// ScanSources reads a VDIF stream and returns its source ids (see SourceID)
// in order of first appearance, e.g. the thread interleave of a recording.
func ScanSources(r io.Reader) ([]uint32, error) {
	rd := NewReader(r)
	seen := map[uint32]bool{}
	var out []uint32
	for {
		f, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if src := SourceID(&f.Header); !seen[src] {
			seen[src] = true
			out = append(out, src)
		}
	}
}

// mfpAlign pads MFP payloads to 8 bytes, the VDIF frame granule, which
// costs no padding since every frame is a multiple of 8 bytes.
const mfpAlign = 3

// Packer groups the frames of each thread into native multi-fragment
// packets (schemas.AppendMFP) of up to n frames. An MFP's fragments must have
// consecutive event ids and share their flags, so a thread's packet is closed
// early at a second boundary, a missing frame, or a change of the invalid
// flag. Frames are copied; the caller may reuse them after Add.
type Packer struct {
	n       int
	open    map[uint32]*packing
	Packets uint64 // packets emitted
	Frames  uint64 // frames emitted inside packets
}

// packing is one thread's packet under construction.
type packing struct {
	first uint64
	flags schemas.FragmentFlag
	data  []byte // the frames back to back
	sizes []int
}

// NewPacker returns a packer with packing factor n (1..schemas.MaxPacking).
func NewPacker(n int) (*Packer, error) {
	if n < 1 || n > schemas.MaxPacking {
		return nil, fmt.Errorf("vdif: packing factor %d outside 1..%d", n, schemas.MaxPacking)
	}
	return &Packer{n: n, open: map[uint32]*packing{}}, nil
}

// Add adds one frame and appends to dst the packets it completes: its
// thread's open packet if f cannot extend it, and the packet f fills.
func (p *Packer) Add(dst []byte, f *Frame) []byte {
	frag := FrameFragment(f)
	pk := p.open[frag.SourceID]
	if pk == nil {
		pk = &packing{}
		p.open[frag.SourceID] = pk
	}
	if len(pk.sizes) > 0 && (frag.EventID != pk.first+uint64(len(pk.sizes)) || frag.Flags != pk.flags) {
		dst = p.emit(dst, frag.SourceID, pk)
	}
	if len(pk.sizes) == 0 {
		pk.first, pk.flags = frag.EventID, frag.Flags
	}
	pk.data = append(pk.data, f.Bytes...)
	pk.sizes = append(pk.sizes, len(f.Bytes))
	if len(pk.sizes) == p.n {
		dst = p.emit(dst, frag.SourceID, pk)
	}
	return dst
}

// Flush appends every open packet to dst, in ascending source id order.
func (p *Packer) Flush(dst []byte) []byte {
	srcs := make([]uint32, 0, len(p.open))
	for s, pk := range p.open {
		if len(pk.sizes) > 0 {
			srcs = append(srcs, s)
		}
	}
	slices.Sort(srcs)
	for _, s := range srcs {
		dst = p.emit(dst, s, p.open[s])
	}
	return dst
}

func (p *Packer) emit(dst []byte, src uint32, pk *packing) []byte {
	payloads := make([][]byte, len(pk.sizes))
	off := 0
	for i, sz := range pk.sizes {
		payloads[i] = pk.data[off : off+sz]
		off += sz
	}
	dst = schemas.AppendMFP(dst, src, pk.first, pk.flags, mfpAlign, payloads, nil)
	p.Packets++
	p.Frames += uint64(len(pk.sizes))
	pk.data, pk.sizes = pk.data[:0], pk.sizes[:0]
	return dst
}
