package emulator

import (
	"cmp"
	"slices"

	"github.com/sluice-daq/sluice/schemas"
)

// packer groups the fragments a format's Splitter makes of a file into
// sluice multi-fragment packets, one source's fragments per packet, as a
// readout board sends them: up to n fragments of consecutive event ids and
// equal flags (a packet's fragments share its flags), each with the CRC
// the splitter gave it, so that a fragment the file holds corrupt stays
// so for the builder to mark. FlagEmpty is not a packet's flag: an empty
// payload says it (the fragment of an LHCb source without a bank in an
// event), and a readout board's packet spans such events. A source's packet goes out when it is full
// or its next fragment cannot extend it; at flush the open ones go, in
// the order of their first event, then of the sources' first fragments.
type packer struct {
	n     int
	open  map[uint32]*openPacket
	order []uint32 // sources, by first fragment
	emit  func(p emuPacket)
}

// openPacket is one source's packet under construction.
type openPacket struct {
	first uint64
	flags schemas.FragmentFlag
	data  []byte // payloads back to back (copies)
	sizes []int
	crcs  []uint32
}

func newPacker(n int, emit func(emuPacket)) *packer {
	return &packer{n: n, open: map[uint32]*openPacket{}, emit: emit}
}

// add takes one fragment, copying its payload.
func (pk *packer) add(f *schemas.Fragment) {
	op := pk.open[f.SourceID]
	if op == nil {
		op = &openPacket{}
		pk.open[f.SourceID] = op
		pk.order = append(pk.order, f.SourceID)
	}
	flags := f.Flags &^ schemas.FlagEmpty
	if len(op.sizes) > 0 && (f.EventID != op.first+uint64(len(op.sizes)) || flags != op.flags) {
		pk.send(f.SourceID, op)
	}
	if len(op.sizes) == 0 {
		op.first, op.flags = f.EventID, flags
	}
	op.data = append(op.data, f.Payload...)
	op.sizes = append(op.sizes, len(f.Payload))
	op.crcs = append(op.crcs, f.CRC)
	if len(op.sizes) == pk.n {
		pk.send(f.SourceID, op)
	}
}

// flush sends every open packet.
func (pk *packer) flush() {
	var srcs []uint32
	for _, s := range pk.order {
		if len(pk.open[s].sizes) > 0 {
			srcs = append(srcs, s)
		}
	}
	slices.SortStableFunc(srcs, func(a, b uint32) int { return cmp.Compare(pk.open[a].first, pk.open[b].first) })
	for _, s := range srcs {
		pk.send(s, pk.open[s])
	}
}

func (pk *packer) send(src uint32, op *openPacket) {
	views := make([][]byte, len(op.sizes))
	off := 0
	for i, sz := range op.sizes {
		views[i] = op.data[off : off+sz]
		off += sz
	}
	b := schemas.AppendMFP(nil, src, op.first, op.flags, 3, views, op.crcs)
	pk.emit(emuPacket{b: b, source: src, n: len(op.sizes), event: op.first})
	op.data, op.sizes, op.crcs = op.data[:0], op.sizes[:0], op.crcs[:0]
}
