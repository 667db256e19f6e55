package storage

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sluice-daq/sluice/schemas"
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
	// SegmentEntriesDropped: index entries into the last segment file
	// whose bytes were not there whole (a machine crash between the two
	// fsyncs of a write, which was then not acknowledged); removed.
	SegmentEntriesDropped int
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

// verifyLastSegment checks, after an unclean shutdown, every index entry
// that points into the highest segment file: the one that was active, the
// only one that can hold bytes not yet durable (a file is fsync'ed when
// the next one starts, unless the policy is SyncNever). An entry whose
// bytes are missing or fail their checksum was written at the same time
// as its bytes and never acknowledged; it is removed. It returns how
// many were.
func (s *Store) verifyLastSegment() (int, error) {
	ids, err := listSegments(s.opts.Dir)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	last := ids[len(ids)-1]
	var entries []indexEntry
	err = s.scanIndex(func(key []byte, p valuePtr, raw []byte) {
		if p.seg == last {
			entries = append(entries, indexEntry{key: bytes.Clone(key), ptr: p})
		}
	})
	if err != nil {
		return 0, err
	}
	var bad [][]byte
	var buf []byte
	for _, e := range entries {
		b, err := s.segs.read(e.ptr, buf)
		buf = b
		switch {
		case err == nil:
		case errors.Is(err, schemas.ErrCRCMismatch), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			bad = append(bad, e.key)
		default:
			return 0, err
		}
	}
	if len(bad) == 0 {
		return 0, nil
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range bad {
		if err := wb.Delete(k); err != nil {
			return 0, err
		}
	}
	if err := wb.Flush(); err != nil {
		return 0, err
	}
	return len(bad), s.db.Sync()
}
