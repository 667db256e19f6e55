package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// dirLockName is the store's own lock file, beside badger's LOCK. Badger
// takes its directory lock inside badger.Open, but Open changes files
// before that (it removes the empty logs a killed writer left): without a
// lock of its own first, a second process opening a store in use removed
// the log file the first had just created and was about to size, and the
// first failed to open ("while trying to delete empty file … no such
// file"; seen in TestRunThatFailsBeforeItsFirstEvent).
const dirLockName = "sluice.lock"

// dirLock is an flock(2) on dir/sluice.lock held for the store's life:
// exclusive for a writer, shared for a reader.
type dirLock struct {
	f      *os.File
	writer bool // it wrote its pid in the file
}

// lockDir takes the store directory's lock before Open touches any file:
// a writer creates the directory and the lock file if need be and locks
// it exclusively; a reader locks it shared if it exists (a directory it
// may not write to, or a store no writer of this version has opened, has
// badger's lock only). ErrLocked when another process holds it.
func lockDir(dir string, readOnly bool) (*dirLock, error) {
	path := filepath.Join(dir, dirLockName)
	how := unix.LOCK_EX
	var f *os.File
	var err error
	if readOnly {
		how = unix.LOCK_SH
		if f, err = os.Open(path); errors.Is(err, os.ErrNotExist) {
			return &dirLock{}, nil
		}
	} else {
		if err = os.MkdirAll(dir, 0o755); err == nil {
			f, err = os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		}
	}
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			// A writer holding it wrote its pid there (readers write
			// nothing, a writer empties it at release).
			if pid := lockHolder(path); pid > 0 {
				return nil, fmt.Errorf("%w (%s is locked by pid %d)", ErrLocked, path, pid)
			}
			return nil, fmt.Errorf("%w (%s is locked)", ErrLocked, path)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if !readOnly {
		// Who holds it, for the refusal of the next opener; a failure
		// here costs only that message.
		if f.Truncate(0) == nil {
			_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		}
	}
	return &dirLock{f: f, writer: !readOnly}, nil
}

// lockHolder is the pid a writer wrote in the lock file at path, if that
// process is alive (a killed writer's stays in the file), else 0.
func lockHolder(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil || pid <= 0 || unix.Kill(pid, 0) == unix.ESRCH {
		return 0
	}
	return pid
}

// release drops the lock (closing the file releases the flock); a
// writer empties the file first.
func (l *dirLock) release() {
	if l != nil && l.f != nil {
		if l.writer {
			_ = l.f.Truncate(0)
		}
		l.f.Close()
		l.f = nil
	}
}
