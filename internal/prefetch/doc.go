// Package prefetch asks the core to load memory into its caches ahead of
// its use (PREFETCHT0 on amd64, nothing elsewhere): a hint that never
// faults and changes no result. The data path uses it where it reads
// bytes a board's DMA (or the emulator standing in for it) left in memory
// and no cache: the builder the fragments it copies next, the readout
// ring's reader the next record's headers.
package prefetch
