package storage

// MaxEventBytes is the largest encoded event a store opened with o takes
// (Store.MaxEventBytes: its value limit, which the memory plan sizes from
// MemoryBytes, 4..256 MiB, unless ValueLogFileSize sets it), for checking
// sizes before the store is opened.
func (o Options) MaxEventBytes() int64 {
	o.defaults()
	return planMemory(&o).ValueLogFileSz
}

// MemoryForEvent is the least MemoryBytes with which a store opened with
// o takes an encoded event of n bytes, or 0 when none does (n above the
// 256 MiB a store ever takes, or ValueLogFileSize fixing a smaller limit).
func (o Options) MemoryForEvent(n int64) int64 {
	if o.WithMemory(1<<40).MaxEventBytes() < n {
		return 0
	}
	lo, hi := int64(MinMemoryBytes), int64(1<<40) // MaxEventBytes grows with MemoryBytes
	for lo < hi {
		m := lo + (hi-lo)/2
		if o.WithMemory(m).MaxEventBytes() >= n {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return (lo + 1<<20 - 1) &^ (1<<20 - 1) // whole MiB
}

// EventOverhead bounds the bytes an encoded event takes beyond its payload
// for the given source groups and sources: the value header, per group its
// header and per source its size and a missing or corrupt entry, and 4 KiB
// for the verdict's stage name and reason text.
func EventOverhead(groups, sources int) int64 {
	return valueHeaderSize + 12*int64(groups) + 12*int64(sources) + 4<<10
}
