// Package shmspace reserves the pages of shared-memory files (the readout
// rings and the plugin regions in /dev/shm) when they are created. A tmpfs
// file made with ftruncate alone is sparse: its pages are allocated on first
// touch, and a touch that finds the tmpfs full kills the process with
// SIGBUS (Docker gives containers a 64 MiB /dev/shm). Reserving with
// fallocate at creation turns that into an error at creation that names the
// sizes, and no page of the mapping is ever unreserved.
package shmspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ErrNoSpace: the file system holding a shared-memory file has too little
// free space for it.
var ErrNoSpace = errors.New("not enough shared memory")

// Reserve gives f (an empty file just created) size bytes, every page
// allocated. On a file system that cannot preallocate (EOPNOTSUPP: not
// tmpfs, e.g. the temporary directory's disk) it only sets the size.
// Errors: ErrNoSpace naming size and the free space of f's file system
// (the caller names the file).
func Reserve(f *os.File, size int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, 0, size)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS):
		return f.Truncate(size)
	case errors.Is(err, unix.ENOSPC):
		// A failed fallocate may leave the pages it did allocate.
		_ = f.Truncate(0)
		dir := filepath.Dir(f.Name())
		free, total, serr := Free(dir)
		if serr != nil {
			return fmt.Errorf("%w: %s needed in %s", ErrNoSpace, Bytes(uint64(size)), dir)
		}
		return fmt.Errorf("%w: %s needed; %s has %s free of %s", ErrNoSpace, Bytes(uint64(size)), dir, Bytes(free), Bytes(total))
	default:
		return fmt.Errorf("reserving %s for %s: %w", Bytes(uint64(size)), f.Name(), err)
	}
}

// Free is the space left (for an unprivileged user) and the size of the
// file system holding dir, in bytes.
func Free(dir string) (free, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}

// Bytes is n in the largest binary unit that keeps one decimal ("64MiB",
// "1.5GiB", "512B"), for messages.
func Bytes(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v, u := float64(n), 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	if u == 0 {
		return fmt.Sprintf("%dB", n)
	}
	// A small remainder is written out ("64MiB+4KiB": a ring's data and
	// its control page), not rounded away: 64MiB needed against 64MiB free
	// would read as if it fitted.
	if unit := uint64(1) << (10 * u); n%unit != 0 && n%unit < unit/100 {
		return Bytes(n-n%unit) + "+" + Bytes(n%unit)
	}
	s := fmt.Sprintf("%.1f", v)
	if len(s) > 2 && s[len(s)-2:] == ".0" {
		s = s[:len(s)-2]
	}
	return s + units[u]
}
