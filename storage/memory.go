package storage

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// DefaultMemoryBytes is the store's memory share when Options.MemoryBytes
// is zero.
const DefaultMemoryBytes = 128 << 20

// MinMemoryBytes is the smallest share the store accepts: two 2 MiB
// memtables (badger's floor for a useful one), small caches and 8 MiB of
// resident log pages.
const MinMemoryBytes = 16 << 20

// memoryPlan is how the store's memory share (Options.MemoryBytes) is
// spent. Every part is badger memory the store can bound:
//
//	memtables    NumMemtables x MemTableSize: skiplist arenas on the Go
//	             heap, plus each one's .mem write-ahead log, mapped at twice
//	             its size but resident only where written (index entries
//	             are ~60 bytes: the values are in segment files)
//	block cache  decoded table blocks (compression is off, so small)
//	index cache  table indexes and bloom filters (0 would keep every
//	             table's index on the heap, unbounded)
//	mapped       pages of the memory-mapped value-log, memtable-log and
//	             table files resident in this process, trimmed by
//	             MADV_PAGEOUT once they pass it (badger never unmaps a file
//	             it keeps; segment files are not mapped, and the value log
//	             only holds the values of a format-1 store, read through
//	             its mapping)
//	cursor pool  recycled batch buffers of cursors (replay, export)
//	staging      the buffer segment files are written from with O_DIRECT
//	             (direct.go), mapped at the first write
//
// Badger's own bookkeeping outside these (table iterators, compaction
// buffers, the WriteBatch's pending entries, ~10-20 MiB) is not bounded
// by an option: it comes out of the Go heap's share.
type memoryPlan struct {
	NumMemtables   int
	MemTableSize   int64
	BlockCache     int64
	IndexCache     int64
	Mapped         int64
	CursorPool     int64
	Staging        int64
	ValueLogFileSz int64
}

// WithMemory is o with the store's memory share set to n bytes.
func (o Options) WithMemory(n int64) Options {
	o.MemoryBytes = n
	return o
}

// MappedBound is the part of the store's memory share that its mapped
// files' resident pages are kept within (trimmed above it).
func (o Options) MappedBound() int64 {
	o.defaults()
	return planMemory(&o).Mapped
}

// planMemory splits Options.MemoryBytes as documented on memoryPlan: a
// quarter for two memtables (2..64 MiB each), 1/16 each for the caches,
// half for resident mapped pages, 1/8 for the cursor pool less the staging
// buffer (1/32, 256 KiB .. 4 MiB; none with Options.PageCache). An explicit
// MemTableSize or ValueLogFileSize (tests) is kept.
func planMemory(o *Options) memoryPlan {
	m := o.MemoryBytes
	p := memoryPlan{NumMemtables: 2, MemTableSize: clamp(m/8, 2<<20, 64<<20),
		BlockCache: m / 16, IndexCache: m / 16, Mapped: m / 2, CursorPool: m / 8}
	if !o.PageCache {
		p.Staging = clamp(m/32, 256<<10, 4<<20) &^ (dioAlign - 1)
		p.CursorPool -= p.Staging
	}
	if o.MemTableSize > 0 {
		p.MemTableSize = o.MemTableSize
	}
	// Half the mapped share (4..256 MiB): the segment files' target size,
	// which bounds an event (a reader holds one whole value), and
	// badger's value-log file size (a format-1 store's values are read
	// through its mapping, trimmed within the share).
	p.ValueLogFileSz = clamp(p.Mapped/2, 4<<20, 256<<20)
	if o.ValueLogFileSize > 0 {
		p.ValueLogFileSz = o.ValueLogFileSize
	}
	return p
}

func clamp(v, lo, hi int64) int64 { return max(lo, min(v, hi)) }

// Bytes is what the plan bounds in total.
func (p memoryPlan) Bytes() int64 {
	return int64(p.NumMemtables)*p.MemTableSize + p.BlockCache + p.IndexCache + p.Mapped + p.CursorPool + p.Staging
}

// MemoryStats is what the store's memory holds: the plan's bound, and the
// peak resident bytes of its mapped log and table files (measured before
// each trim).
type MemoryStats struct {
	BoundBytes      int64  `json:"bound_bytes"`
	MappedBound     int64  `json:"mapped_bound_bytes"`
	MappedPeakBytes int64  `json:"mapped_peak_bytes"`
	StagingBytes    int64  `json:"staging_bytes"` // the O_DIRECT staging buffer once it was mapped, a peak (0 before the first write, or writing through the page cache)
	Trims           uint64 `json:"trims"`         // times the mapped pages were paged out
}

// trimmer keeps the resident pages of the store's mapped files within a
// bound. It measures the resident pages of its mappings of files in the
// store directory (trimmer.mappings) and asks the kernel to page out those mappings with
// MADV_PAGEOUT: a hint that never changes contents (dirty pages are written
// back or stay in the page cache, clean ones are dropped), so a mapping
// badger remaps or unmaps meanwhile comes to no harm, unlike with
// MADV_DONTNEED.
type trimmer struct {
	dir     string
	bound   int64
	written atomic.Int64 // bytes written (or read) since the last trim
	peak    atomic.Int64
	trims   atomic.Uint64
	mu      sync.Mutex
	buf     []byte
}

func newTrimmer(dir string, bound int64) *trimmer {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	return &trimmer{dir: filepath.Clean(abs) + string(filepath.Separator), bound: bound}
}

// due reports whether enough bytes went through the mappings since the last
// trim that they may have passed a quarter of the bound.
func (t *trimmer) due() bool { return t.written.Load() >= t.bound/4 }

// touched counts n bytes written or read through the mappings and trims
// at once when due: at disk or cache speed a background tick would let
// hundreds of MiB in between two checks.
func (t *trimmer) touched(n int64) {
	if t.written.Add(n) >= t.bound/4 {
		t.trim()
	}
}

// trim measures the resident bytes of the store's mappings, records the
// peak and pages them out when they are above half the bound (some stay:
// what badger reads again soon, such as table indexes, is cheap to keep).
func (t *trimmer) trim() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.written.Store(0)
	maps, err := t.mappings()
	if err != nil {
		return 0
	}
	var rss int64
	for _, m := range maps {
		rss += m.rss
	}
	if rss > t.peak.Load() {
		t.peak.Store(rss)
	}
	if rss <= t.bound/2 {
		return rss
	}
	for _, m := range maps {
		if m.rss > 0 {
			// Errors (EINVAL on kernels before 5.4) leave the pages
			// where they are; the peak then shows it.
			_, _, _ = unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_PAGEOUT)
		}
	}
	t.trims.Add(1)
	return rss
}

type mapping struct {
	start, end uintptr
	rss        int64
}

// mappings lists this process's mappings of files in the store directory
// with their resident bytes: the ranges from /proc/self/maps, the pages
// present in this process's page tables (what RSS counts) from
// /proc/self/pagemap. Reading /proc/self/smaps instead makes the kernel
// walk and format every mapping of the process (the Go heap, the readout
// ring, the plugin arena): ~5 ms a time, a tenth of sluice bench's CPU.
func (t *trimmer) mappings() ([]mapping, error) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	var out []mapping
	for len(maps) > 0 {
		line := maps
		if k := bytes.IndexByte(maps, '\n'); k >= 0 {
			line, maps = maps[:k], maps[k+1:]
		} else {
			maps = nil
		}
		// start-end perms offset dev inode path; the path starts at the
		// first '/' after the range (the fields before hold none).
		k := bytes.IndexByte(line, '/')
		if k < 0 || !bytes.HasPrefix(line[k:], []byte(t.dir)) {
			continue
		}
		rng, _, _ := bytes.Cut(line, []byte(" "))
		lo, hi, ok := bytes.Cut(rng, []byte("-"))
		if !ok {
			continue
		}
		s, err1 := strconv.ParseUint(string(lo), 16, 64)
		e, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err1 != nil || err2 != nil || e <= s {
			continue
		}
		out = append(out, mapping{start: uintptr(s), end: uintptr(e)})
	}
	if len(out) == 0 {
		return out, nil
	}
	pm, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return nil, err
	}
	defer pm.Close()
	if len(t.buf) == 0 {
		t.buf = make([]byte, 64<<10)
	}
	page := uintptr(os.Getpagesize())
	for i := range out {
		m := &out[i]
		// One 8-byte entry per page; bit 63: present in RAM.
		for first, n := m.start/page, (m.end-m.start)/page; n > 0; {
			c := min(n, uintptr(len(t.buf)/8))
			got, err := pm.ReadAt(t.buf[:8*c], int64(first*8))
			if got < 8 {
				if err == nil {
					err = io.ErrUnexpectedEOF
				}
				return nil, err
			}
			c = uintptr(got / 8)
			for k := uintptr(0); k < c; k++ {
				if t.buf[8*k+7]&0x80 != 0 {
					m.rss += int64(page)
				}
			}
			first, n = first+c, n-c
		}
	}
	return out, nil
}

func (t *trimmer) stats() (peak int64, trims uint64) { return t.peak.Load(), t.trims.Load() }
