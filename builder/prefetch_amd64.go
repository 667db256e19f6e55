package builder

import "unsafe"

// prefetch issues PREFETCHT0 for every 64-byte line of [p, p+n)
// (prefetch_amd64.s).
//
//go:noescape
func prefetch(p unsafe.Pointer, n uintptr)
