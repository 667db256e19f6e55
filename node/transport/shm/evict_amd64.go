package shm

import "unsafe"

// evict writes back and drops from every CPU cache each 64-byte line of
// [p, p+n): where a board's DMA leaves the bytes it wrote, in memory and in
// no core's cache. CLFLUSHOPT where the CPU has it (CPUID leaf 7, EBX bit
// 23: the flushes of one call overlap), else CLFLUSH (every x86-64 CPU has
// it; each waits for the one before). evict_amd64.s.
func evict(p unsafe.Pointer, n uintptr) {
	if hasCLFLUSHOPT {
		evictOpt(p, n)
	} else {
		evictFlush(p, n)
	}
}

var hasCLFLUSHOPT = cpuid7ebx()&(1<<23) != 0

//go:noescape
func evictOpt(p unsafe.Pointer, n uintptr)

//go:noescape
func evictFlush(p unsafe.Pointer, n uintptr)

func cpuid7ebx() uint32
