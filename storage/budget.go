package storage

import (
	"math"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// guard is the disk budget. badger writes its logs through shared memory
// maps, and a store of a page of a map that the file system cannot back
// kills the process with SIGBUS; the guard keeps MinFreeBytes free (which
// must cover what badger writes on its own: a memtable flush, a value-log
// file header, compactions) by refusing write batches before that point.
type guard struct {
	dir     string
	minFree uint64
	maxSize uint64
	statfs  func(string, *unix.Statfs_t) error

	mu       sync.Mutex
	size     uint64        // store bytes at the last directory scan
	pending  uint64        // bytes admitted that the last scan may not have seen
	written  uint64        // of pending, bytes whose write has ended (wrote)
	headroom int64         // last computed headroom (bytes; may be negative)
	refused  uint64        // bytes of the last refused write, until one is admitted
	ready    chan struct{} // closed while writes are admitted
}

func newGuard(dir string, minFree, maxSize uint64, statfs func(string, *unix.Statfs_t) error) *guard {
	g := &guard{dir: dir, minFree: minFree, maxSize: maxSize, statfs: statfs, ready: make(chan struct{})}
	close(g.ready)
	return g
}

// freeBytes is the space available to unprivileged writers on the store's
// file system: one statfs call, made before every write batch.
func (g *guard) freeBytes() (uint64, error) {
	var st unix.Statfs_t
	if err := g.statfs(g.dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// measure returns the free bytes and the bytes the store's files occupy
// (allocated blocks, not apparent sizes: badger's value-log and memtable
// files are sparse until written). The directory scan costs a stat per
// file, so writes use the last scan plus what was admitted since.
func (g *guard) measure() (free, size uint64, err error) {
	if free, err = g.freeBytes(); err != nil {
		return 0, 0, err
	}
	ents, err := os.ReadDir(g.dir)
	if err != nil {
		return 0, 0, err
	}
	for _, e := range ents {
		fi, err := os.Lstat(filepath.Join(g.dir, e.Name()))
		if err != nil {
			continue // removed meanwhile (compaction, GC)
		}
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
			size += uint64(sys.Blocks) * 512
		} else {
			size += uint64(fi.Size())
		}
	}
	return free, size, nil
}

// decide computes the headroom left with free bytes free and a store of
// size bytes, and the error that refuses writing need more bytes, if any.
func (g *guard) decide(free, size, need uint64) (int64, error) {
	head := clampSub(free, g.minFree)
	if g.maxSize > 0 {
		head = min(head, clampSub(g.maxSize, size))
	}
	switch {
	case free < g.minFree || free-g.minFree < need:
		return head, &DiskBudgetError{Dir: g.dir, Need: need, Free: free, MinFree: g.minFree, Size: size, MaxSize: g.maxSize}
	case g.maxSize > 0 && (size > g.maxSize || g.maxSize-size < need):
		return head, &DiskBudgetError{Dir: g.dir, Need: need, Free: free, MinFree: g.minFree, Size: size, MaxSize: g.maxSize, BySizeCap: true}
	}
	return head, nil
}

// clampSub is a-b as a signed headroom, saturating at the int64 range.
func clampSub(a, b uint64) int64 {
	if a >= b {
		return int64(min(a-b, math.MaxInt64))
	}
	return -int64(min(b-a, math.MaxInt64))
}

// admit is called before every write batch of need bytes. When the batch
// does not fit it returns the *DiskBudgetError and raises backpressure
// (Writable's channel stays open) until refresh finds room again.
func (g *guard) admit(need uint64, m *metrics) error {
	free, err := g.freeBytes()
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	head, err := g.decide(free, g.size+g.pending, need)
	if err != nil {
		g.setHeadroom(head, m)
		g.refused = need
		g.block()
		return err
	}
	g.refused = 0
	g.pending += need
	g.setHeadroom(head-int64(min(need, math.MaxInt64)), m)
	g.unblock()
	return nil
}

// wrote is called once the write of n admitted bytes has ended (whether
// it succeeded or not): from then on a directory scan sees its bytes.
func (g *guard) wrote(n uint64) {
	g.mu.Lock()
	g.written += n
	g.mu.Unlock()
}

// refresh re-measures, with a directory scan (every GuardInterval and
// after GC), and lifts the backpressure once there is headroom again: room
// for the write that was refused, not merely a positive headroom, or the
// writer would be woken only to be refused again.
//
// Only the bytes of writes that had ended before the scan began leave the
// pending count: a write admitted but still going on may have put none of
// its bytes in the files yet. (Dropping all of pending at each scan let a
// store under load pass max_bytes by about one batch: a scan between a
// batch's admission and its write forgot it.)
func (g *guard) refresh(m *metrics) {
	g.mu.Lock()
	seen := g.written
	g.mu.Unlock()
	free, size, err := g.measure()
	if err != nil {
		return // unmeasurable now: keep the last state
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.size = size
	g.pending -= seen
	g.written -= seen
	head, _ := g.decide(free, size, 0)
	g.setHeadroom(head, m)
	if head > 0 && uint64(head) >= g.refused {
		g.unblock()
	} else {
		g.block()
	}
}

func (g *guard) setHeadroom(h int64, m *metrics) {
	g.headroom = h
	m.headroom.Set(float64(h))
}

func (g *guard) block() {
	select {
	case <-g.ready:
		g.ready = make(chan struct{})
	default: // already blocked
	}
}

func (g *guard) unblock() {
	select {
	case <-g.ready:
	default:
		close(g.ready)
	}
}

// Headroom is the number of bytes the store may still write before the
// disk budget refuses writes, as last measured (before each write and every
// Options.GuardInterval); negative when over budget.
func (s *Store) Headroom() int64 {
	s.guard.mu.Lock()
	defer s.guard.mu.Unlock()
	return s.guard.headroom
}

// Writable is the backpressure signal: it returns a channel that is closed
// while the store admits writes. After a write was refused for the disk
// budget the channel stays open until a re-check finds headroom again;
// the node waits on it (and slows its readout) instead of dropping events.
func (s *Store) Writable() <-chan struct{} {
	s.guard.mu.Lock()
	defer s.guard.mu.Unlock()
	return s.guard.ready
}
