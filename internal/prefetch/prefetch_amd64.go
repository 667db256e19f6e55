package prefetch

import "unsafe"

// Lines issues PREFETCHT0 for every 64-byte line of [p, p+n)
// (prefetch_amd64.s).
//
//go:noescape
func Lines(p unsafe.Pointer, n uintptr)
