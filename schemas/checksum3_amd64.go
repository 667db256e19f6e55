package schemas

import "golang.org/x/sys/cpu"

var hasCastagnoli3 = cpu.X86.HasSSE42

// castagnoli3 runs the CRC32 instruction (CRC-32C) over words 8-byte words
// of each of a, b and c from the raw CRCs ca, cb, cc, interleaved, and
// returns the three raw CRCs (checksum3_amd64.s). words >= 1.
//
//go:noescape
func castagnoli3(ca, cb, cc uint32, a, b, c *byte, words int) (uint32, uint32, uint32)
