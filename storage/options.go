package storage

import (
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/internal/shmspace"
)

// SyncPolicy says when written events are made durable (fsync'ed). Its
// values are spelled as in the store section of the node's configuration.
type SyncPolicy string

const (
	// SyncEveryBatch: Put and Commit flush and fsync before returning, so
	// their Ack is durable against power loss as well as process death.
	SyncEveryBatch SyncPolicy = "every-batch"
	// SyncInterval: a background loop fsyncs every Options.SyncInterval;
	// WaitDurable blocks until an Ack's sequence number has been covered.
	SyncInterval SyncPolicy = "interval"
	// SyncNever: writes are in the segment files and badger's
	// memory-mapped logs (the kernel's page cache) before Put returns (they
	// survive the death of the process, not of the machine); the
	// operating system writes them back when it likes.
	SyncNever SyncPolicy = "never"
)

// Options configure a Store. The fields with a yaml key are the store
// section of the node's configuration file (`store:`); the others are for
// programs and tests. Zero fields take the values of DefaultOptions, except
// Dir (required) and GCInterval (0: no GC loop).
type Options struct {
	Dir          string        `yaml:"path"`          // store directory; created if missing
	Sync         SyncPolicy    `yaml:"sync"`          // when writes are fsync'ed
	SyncInterval time.Duration `yaml:"sync_interval"` // the fsync period under SyncInterval

	// Disk budget, checked before every write batch (see budget.go).
	MinFreeBytes  conf.ByteSize `yaml:"min_free_bytes"` // free bytes to leave on the file system
	MaxStoreBytes conf.ByteSize `yaml:"max_bytes"`      // bytes the store's files may occupy; 0 = no limit

	// GC (see gc.go): every GCInterval, segment files with at least
	// GCDiscardRatio dead bytes are rewritten, dead ones deleted, and
	// badger's value log collected. 0 disables the background loop.
	GCInterval time.Duration `yaml:"gc_interval"`

	// PageCache writes segment files through the kernel's page cache
	// (writev) instead of with O_DIRECT from the store's staging buffer
	// (direct.go). Off by default; a file system that refuses O_DIRECT
	// gets page-cache writes anyway.
	PageCache bool `yaml:"page_cache"`

	ReadOnly       bool          `yaml:"-"` // open for stat/ls/export only (no writes, no GC)
	GuardInterval  time.Duration `yaml:"-"` // disk budget re-check period while writes are refused
	GCDiscardRatio float64       `yaml:"-"` // in (0, 1)

	// MemoryBytes is the store's share of the node's memory budget: badger's
	// memtables, caches, resident mapped files and the cursors' buffer
	// pool, split as planMemory says (default DefaultMemoryBytes, at
	// least MinMemoryBytes).
	MemoryBytes int64 `yaml:"-"`
	// Badger sizing overrides for tests; 0: from MemoryBytes.
	MemTableSize     int64 `yaml:"-"`
	ValueLogFileSize int64 `yaml:"-"` // badger accepts 1 MiB … 2 GiB
	ValueThreshold   int64 `yaml:"-"` // values of at least this size go to the value log

	// Registerer receives the store's metrics; nil: no metrics.
	Registerer prometheus.Registerer `yaml:"-"`

	// statfs is unix.Statfs, replaced in tests to simulate a full disk.
	statfs func(path string, st *unix.Statfs_t) error
}

// DefaultOptions are the defaults of the store section and of zero Options
// fields.
func DefaultOptions() Options {
	return Options{
		Dir:            "./data",
		Sync:           SyncEveryBatch,
		SyncInterval:   time.Second,
		MinFreeBytes:   1 << 30,
		GCInterval:     5 * time.Minute,
		GuardInterval:  time.Second,
		GCDiscardRatio: 0.5,
		MemoryBytes:    DefaultMemoryBytes,
		ValueThreshold: 1 << 10,
	}
}

func (o *Options) defaults() {
	d := DefaultOptions()
	if o.Sync == "" {
		o.Sync = d.Sync
	}
	if o.SyncInterval <= 0 {
		o.SyncInterval = d.SyncInterval
	}
	if o.MinFreeBytes == 0 {
		o.MinFreeBytes = d.MinFreeBytes
	}
	if o.GuardInterval <= 0 {
		o.GuardInterval = d.GuardInterval
	}
	if o.GCDiscardRatio <= 0 || o.GCDiscardRatio >= 1 {
		o.GCDiscardRatio = d.GCDiscardRatio
	}
	if o.MemoryBytes <= 0 {
		o.MemoryBytes = d.MemoryBytes
	}
	o.MemoryBytes = max(o.MemoryBytes, MinMemoryBytes)
	if o.ValueThreshold <= 0 {
		o.ValueThreshold = d.ValueThreshold
	}
	if o.statfs == nil {
		o.statfs = unix.Statfs
	}
}

// Validate checks the store section as written (a zero duration is not
// taken for its default here) and returns its problems, with paths
// relative to the section ("sync_interval").
func (o Options) Validate() conf.Problems {
	var ps conf.Problems
	if o.Dir == "" {
		ps.Add("path", nil, "want a directory for the event store, e.g. ./data")
	}
	if !o.Sync.valid() {
		ps.Add("sync", o.Sync, syncWant)
	}
	if o.Sync == SyncInterval && o.SyncInterval <= 0 {
		ps.Add("sync_interval", o.SyncInterval, "want a positive duration with sync: %s", SyncInterval)
	}
	if o.GCInterval <= 0 {
		ps.Add("gc_interval", o.GCInterval, "want a positive duration such as 5m")
	}
	if o.MaxStoreBytes != 0 && o.MaxStoreBytes < 64<<20 {
		ps.Add("max_bytes", o.MaxStoreBytes, "want 0 (no limit) or at least 64MiB")
	}
	return ps
}

// Preflight checks what the section names on this machine: a path that
// exists must be a directory the node can write, and a path that does not
// must be one it can create (its nearest existing parent is a writable
// directory; tried by creating and removing an empty directory there, so
// that a read-only file system or /proc is caught as well as permissions).
// It leaves nothing behind.
func (o Options) Preflight() conf.Problems {
	var ps conf.Problems
	if o.Dir == "" || o.ReadOnly {
		return ps
	}
	st, err := os.Stat(o.Dir)
	switch {
	case err == nil && !st.IsDir():
		ps.Add("path", o.Dir, "want a directory, found a file")
		return ps
	case err == nil:
		if err := tryWrite(o.Dir); err != nil {
			ps.Add("path", o.Dir, "want a directory the node can write (%v)", err)
		}
		o.preflightSize(o.Dir, &ps)
		return ps
	}
	parent := filepath.Dir(filepath.Clean(o.Dir))
	for {
		st, err := os.Stat(parent)
		if err == nil {
			if !st.IsDir() {
				ps.Add("path", o.Dir, "want a path that can be created: %s is a file", parent)
			} else if err := tryWrite(parent); err != nil {
				ps.Add("path", o.Dir, "want a path that can be created: cannot write in %s (%v)", parent, err)
			} else {
				o.preflightSize(parent, &ps)
			}
			return ps
		}
		next := filepath.Dir(parent)
		if next == parent {
			ps.Add("path", o.Dir, "want a path that can be created (%v)", err)
			return ps
		}
		parent = next
	}
}

// preflightSize refuses a min_free_bytes the file system holding dir could
// never leave free (more than its size): every write would be refused, and
// the node used to start without a word and hold its readout from the
// first batch.
func (o Options) preflightSize(dir string, ps *conf.Problems) {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return
	}
	if total := st.Blocks * uint64(st.Bsize); uint64(o.MinFreeBytes) >= total {
		ps.Add("min_free_bytes", o.MinFreeBytes, "want less than the size of the file system holding %s (%s): no write could leave that much free", dir, shmspace.Bytes(total))
	}
}

// tryWrite creates and removes an empty directory in dir.
func tryWrite(dir string) error {
	d, err := os.MkdirTemp(dir, ".sluice-preflight-")
	if err != nil {
		if pe, ok := err.(*os.PathError); ok {
			return pe.Err
		}
		return err
	}
	return os.Remove(d)
}

func (p SyncPolicy) valid() bool {
	return p == SyncEveryBatch || p == SyncInterval || p == SyncNever
}

const syncWant = "want every-batch, interval or never"
