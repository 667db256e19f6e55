package storage

import (
	"errors"
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
	headroom int64         // last measured headroom (bytes; may be negative)
	ready    chan struct{} // closed while writes are admitted
}

func newGuard(dir string, minFree, maxSize uint64, statfs func(string, *unix.Statfs_t) error) *guard {
	g := &guard{dir: dir, minFree: minFree, maxSize: maxSize, statfs: statfs, ready: make(chan struct{})}
	close(g.ready)
	return g
}

// measure returns the bytes available to unprivileged writers on the
// store's file system and the bytes the store's files occupy (allocated
// blocks, not apparent sizes: badger's value-log and memtable files are
// sparse until written).
func (g *guard) measure() (free, size uint64, err error) {
	var st unix.Statfs_t
	if err := g.statfs(g.dir, &st); err != nil {
		return 0, 0, err
	}
	free = st.Bavail * uint64(st.Bsize)
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

// check computes the headroom left after writing need more bytes and the
// error that refuses it, if any.
func (g *guard) check(need uint64) (int64, error) {
	free, size, err := g.measure()
	if err != nil {
		return 0, err
	}
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
	head, err := g.check(need)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		if isBudget(err) {
			g.setHeadroom(head, m)
			g.block()
		}
		return err
	}
	g.setHeadroom(head-int64(min(need, math.MaxInt64)), m)
	g.unblock()
	return nil
}

// refresh re-measures (periodically, and after deletions) and lifts the
// backpressure once there is headroom again.
func (g *guard) refresh(m *metrics) {
	head, err := g.check(0)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil && !isBudget(err) {
		return // unmeasurable now: keep the last state
	}
	g.setHeadroom(head, m)
	if head > 0 {
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

func isBudget(err error) bool { return errors.Is(err, ErrDiskBudget) }
