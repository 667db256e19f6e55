package builder

import "github.com/sluice-daq/sluice/internal/recycle"

// newPoolAllocator returns the builder's default memory.Allocator: it
// recycles freed buffers of every size, because touching fresh memory is what
// makes batch assembly slow (see internal/recycle). A class keeps at most
// 64 buffers and 512 MiB, so that a burst of large batches does not pin
// memory forever. Buffers are NOT zeroed on reuse: the builder writes every
// byte it exposes.
func newPoolAllocator() *recycle.Allocator {
	return recycle.New(recycle.Limits{ClassBytes: 512 << 20, ClassCount: 64})
}
