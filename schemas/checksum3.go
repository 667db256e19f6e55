package schemas

import "hash/crc32"

// Checksum3 returns the CRC-32C (Castagnoli) of a, b and c, as Checksum of
// each would. On amd64 with SSE4.2 the three are computed in one loop,
// interleaved over their common length: one CRC32 instruction has a
// latency of three cycles and the core can run three independent ones at
// once, so the three streams cost about what one does alone. That is what
// the builder needs for the fragments of an event, each with its own CRC
// and most too short for hash/crc32's own three-way split of one buffer
// (it runs single-stream below 504 bytes and on what is left over a
// multiple of 504: half of a 1000-byte fragment).
func Checksum3(a, b, c []byte) (uint32, uint32, uint32) {
	n := min(len(a), len(b), len(c)) &^ 7
	if !hasCastagnoli3 || n < checksum3Min {
		return Checksum(a), Checksum(b), Checksum(c)
	}
	// The raw (non-inverted) CRCs over the first n bytes of each, then
	// hash/crc32 for each one's rest, from the inverted values.
	ra, rb, rc := castagnoli3(^uint32(0), ^uint32(0), ^uint32(0), &a[0], &b[0], &c[0], n/8)
	return crc32.Update(^ra, CRCTable, a[n:]), crc32.Update(^rb, CRCTable, b[n:]), crc32.Update(^rc, CRCTable, c[n:])
}

// checksum3Min is the least common length (bytes) Checksum3 interleaves:
// below it the three calls cost no more.
const checksum3Min = 64
