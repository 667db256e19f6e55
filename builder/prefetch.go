package builder

// prefetchMax bounds the bytes of a fragment prefetched ahead of its copy:
// the first cache lines are those a new stream misses; the hardware
// prefetcher follows a long fragment on its own.
const prefetchMax = 2 << 10

// prefetchFragment asks the core to load the first bytes (at most
// prefetchMax) of the fragment at s into its caches while the current
// one is copied: fragments are read in event order, one from each
// source's packet, so consecutive reads are a packet apart in the ring and
// each starts cold (a cache miss per line the hardware prefetcher had no
// stream for). A hint: no fault, no effect on results.
func prefetchFragment(s *slot) {
	if s.state != 0 && s.data != nil {
		prefetch(s.data, uintptr(min(s.n, prefetchMax)))
	}
}
