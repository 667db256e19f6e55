package builder

import "github.com/sluice-daq/sluice/internal/prefetch"

// prefetchMax bounds the bytes of a fragment prefetched ahead of its copy:
// the first cache lines are those a new stream misses; the hardware
// prefetcher follows a long fragment on its own.
const prefetchMax = 2 << 10

// prefetchAhead is how many fragments ahead of its copy a fragment is
// prefetched. One ahead leaves a fragment's misses in flight only while
// one fragment is copied; four keep ~4 KiB of them in flight (1000-byte
// fragments), which the cores' miss queues hold. Measured on 2026-12-04
// (sluice bench defaults, 8 alternating pairs, AMD EPYC Zen 5): 1.078x
// the GB/s of one ahead in the median (0.996-1.136), 9 % less CPU per
// byte; twelve ahead no better than four (0.990x).
const prefetchAhead = 4

// prefetchFragment asks the core to load the first bytes (at most
// prefetchMax) of the fragment at s into its caches while the current
// one is copied: fragments are read in event order, one from each
// source's packet, so consecutive reads are a packet apart in the ring and
// each starts cold (a cache miss per line the hardware prefetcher had no
// stream for). A hint: no fault, no effect on results.
func prefetchFragment(s *slot) {
	if s.state != 0 && s.data != nil {
		prefetch.Lines(s.data, uintptr(min(s.n, prefetchMax)))
	}
}
