package schemas

import "encoding/binary"

// JoinOrder gives the order in which a joiner writes a built event's
// fragments back into an external format whose splitter recorded the
// original order in a header fragment. list holds that order as
// little-endian uint32 source ids (4·n bytes; a trailing partial id is
// ignored). The result is every listed source that is present, in list
// order, then every present source the list does not name, in the batch's
// order (order, as from PresentFragments), leaving out the header
// fragment's own source.
func JoinOrder(list []byte, present map[uint32][]byte, order []uint32, header uint32) []uint32 {
	listed := make(map[uint32]bool, len(list)/4)
	out := make([]uint32, 0, len(present))
	for k := 0; k+4 <= len(list); k += 4 {
		src := binary.LittleEndian.Uint32(list[k:])
		listed[src] = true
		if present[src] != nil {
			out = append(out, src)
		}
	}
	for _, src := range order {
		if !listed[src] && src != header {
			out = append(out, src)
		}
	}
	return out
}
