package storage

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Recovery is what opening a store for writing found and did about a
// previous writer that did not close it (killed, or the machine died).
type Recovery struct {
	// Dirty: the previous writer left its lock file, so badger replayed
	// its logs and cut them at their last whole entry.
	Dirty bool
	// PreviousPID is the pid written in that lock file (0 if unreadable).
	PreviousPID int
	// EmptyLogsRemoved: zero-length memtable and value-log files removed
	// (a writer killed between creating and sizing one leaves it).
	EmptyLogsRemoved int
	// LogBytesCut is what the recovery cut off the memtable and value-log
	// files: their preallocated, never written ends and any torn last
	// entry (bytes before Open less bytes after).
	LogBytesCut int64
}

// Recovery reports what Open recovered; the zero value when the store was
// closed cleanly, new, or opened read-only.
func (s *Store) Recovery() Recovery { return s.recovery }

// lockPID reads badger's directory lock file: it exists while a writer has
// the store open and holds the writer's pid; a clean close removes it.
func lockPID(dir string) (pid int, exists bool) {
	b, err := os.ReadFile(filepath.Join(dir, "LOCK"))
	if err != nil {
		return 0, !os.IsNotExist(err)
	}
	pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, true
}

// logBytes sums the sizes of the memtable and value-log files in dir.
func logBytes(dir string) int64 {
	var n int64
	for _, pat := range []string{"*.mem", "*.vlog"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		for _, p := range m {
			if st, err := os.Stat(p); err == nil {
				n += st.Size()
			}
		}
	}
	return n
}
