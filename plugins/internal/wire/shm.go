package wire

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sluice-daq/sluice/internal/shmspace"
)

// RegionPrefix starts the file name of every shared-memory region, followed
// by the host's process id, so that regions left behind by a host killed
// with SIGKILL can be recognised and removed (RemoveStaleRegions).
const RegionPrefix = "sluice-trigger-"

// RegionDir is where regions are created: /dev/shm (memory, not disk) when
// it exists, else the temporary directory.
func RegionDir() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// Region is a shared-memory file the host creates, maps read-write once and
// writes event batches into; a plugin maps it read-only (Mapping). The host
// writes a new batch only after the plugin answered for the previous one.
type Region struct {
	Path string
	Data []byte // the mapping, len(Data) bytes
}

// CreateRegion creates and maps a region of size bytes in dir.
func CreateRegion(dir string, size int) (*Region, error) {
	f, err := os.CreateTemp(dir, RegionPrefix+strconv.Itoa(os.Getpid())+"-*")
	if err != nil {
		return nil, fmt.Errorf("wire: creating shared-memory region: %w", err)
	}
	defer f.Close()
	fail := func(err error) (*Region, error) {
		os.Remove(f.Name())
		return nil, fmt.Errorf("wire: shared-memory region %s: %w", f.Name(), err)
	}
	// Every page reserved now: the builder writes batches into the arena
	// and would SIGBUS at the first page a full /dev/shm cannot give.
	if err := shmspace.Reserve(f, int64(size)); err != nil {
		return fail(err)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail(err)
	}
	return &Region{Path: f.Name(), Data: data}, nil
}

// Close unmaps and removes the region. A plugin that still maps it keeps its
// pages until it unmaps them.
func (r *Region) Close() error {
	err := unix.Munmap(r.Data)
	if rmErr := os.Remove(r.Path); err == nil {
		err = rmErr
	}
	r.Data = nil
	return err
}

// StaleRegion is a region a dead host left (StaleRegions): its file, the
// host's pid (from the file's name) and the bytes the file holds.
type StaleRegion struct {
	Path  string
	PID   int
	Bytes int64
}

// RemoveStaleRegions removes the regions in dir whose creating process is no
// longer alive (StaleRegions) and returns those it removed.
func RemoveStaleRegions(dir string) []StaleRegion {
	var out []StaleRegion
	for _, r := range StaleRegions(dir) {
		if os.Remove(r.Path) == nil {
			out = append(out, r)
		}
	}
	return out
}

// StaleRegions lists the regions in dir that are provably stale: the pid
// in their name has exited and the file belongs to this user (a live
// host's region, or another user's, is never listed).
func StaleRegions(dir string) []StaleRegion {
	var out []StaleRegion
	names, _ := filepath.Glob(filepath.Join(dir, RegionPrefix+"*"))
	for _, name := range names {
		pidText, _, ok := strings.Cut(strings.TrimPrefix(filepath.Base(name), RegionPrefix), "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(name, &st) != nil || st.Uid != uint32(os.Geteuid()) {
			continue
		}
		out = append(out, StaleRegion{Path: name, PID: pid, Bytes: st.Blocks * 512})
	}
	return out
}

// Mapping is the plugin's read-only view of the host's current region. It
// maps a region the first time it is named and keeps it mapped for the
// following batches; when the host names another region (it grew), the old
// one is unmapped.
type Mapping struct {
	path string
	data []byte
}

// View returns bytes [off, off+n) of the region at path, which the host says
// is size bytes long, mapping it if it is not the current one.
func (m *Mapping) View(path string, size, off, n uint64) ([]byte, error) {
	if off > size || n > size-off {
		return nil, fmt.Errorf("wire: batch [%d, %d) lies outside region %s of %d bytes", off, off+n, path, size)
	}
	if path != m.path || uint64(len(m.data)) != size {
		if err := m.remap(path, size); err != nil {
			return nil, err
		}
	}
	return m.data[off : off+n : off+n], nil
}

func (m *Mapping) remap(path string, size uint64) error {
	m.Close()
	if !strings.HasPrefix(filepath.Base(path), RegionPrefix) {
		return fmt.Errorf("wire: %s is not a sluice shared-memory region", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("wire: opening shared-memory region: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("wire: shared-memory region %s: %w", path, err)
	}
	if uint64(st.Size()) < size || size == 0 || size > 1<<40 {
		return fmt.Errorf("wire: shared-memory region %s has %d bytes, host says %d", path, st.Size(), size)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("wire: mapping shared-memory region %s: %w", path, err)
	}
	m.path, m.data = path, data
	return nil
}

// Close unmaps the current region, if any.
func (m *Mapping) Close() {
	if m.data != nil {
		unix.Munmap(m.data)
	}
	m.path, m.data = "", nil
}
