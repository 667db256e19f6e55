package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sys/unix"

	"github.com/sluice-daq/sluice/schemas"
)

// Segment files hold the event values (doc.go, "Segment files"); badger
// holds an index entry per event pointing into them. Written with O_DIRECT
// through the store's staging buffer (direct.go), or with writev(2)
// through the page cache where the file system refuses O_DIRECT or
// Options.PageCache asks for it, and read with pread(2): nothing of them
// is mapped into the process, so they take no resident memory beyond the
// staging buffer (the kernel's page cache holds what reads bring in,
// reclaimable).

const (
	segMagic      = "SLUICESG"
	segVersion    = 1
	segHeaderSize = 16
	segExt        = ".seg"
)

// ptrSize is the length of an index entry (a value pointer).
const ptrSize = 24

// ptrVersion is byte 0 of an index entry; an inline event value (written
// by a build before segment files) starts with ValueVersion (1) instead.
const ptrVersion = 2

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// valuePtr locates one event value in a segment file.
type valuePtr struct {
	seg uint32
	off int64
	n   uint32
	crc uint32
}

func appendPtr(dst []byte, p valuePtr) []byte {
	dst = append(dst, ptrVersion, 0, 0, 0)
	dst = binary.LittleEndian.AppendUint32(dst, p.seg)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(p.off))
	dst = binary.LittleEndian.AppendUint32(dst, p.n)
	return binary.LittleEndian.AppendUint32(dst, p.crc)
}

// isPtr reports whether an index value is a pointer (else an inline value).
func isPtr(v []byte) bool { return len(v) == ptrSize && v[0] == ptrVersion }

func parsePtr(v []byte) (valuePtr, error) {
	if !isPtr(v) {
		return valuePtr{}, schemas.Errorf("store index", "version", 0, schemas.ErrBadVersion, "%d bytes starting %d, want a %d-byte pointer version %d", len(v), firstByte(v), ptrSize, ptrVersion)
	}
	return valuePtr{
		seg: binary.LittleEndian.Uint32(v[4:]),
		off: int64(binary.LittleEndian.Uint64(v[8:])),
		n:   binary.LittleEndian.Uint32(v[16:]),
		crc: binary.LittleEndian.Uint32(v[20:]),
	}, nil
}

func firstByte(v []byte) int {
	if len(v) == 0 {
		return -1
	}
	return int(v[0])
}

func segName(id uint32) string { return fmt.Sprintf("%08d%s", id, segExt) }

// segID parses a segment file name; ok is false for other files.
func segID(name string) (uint32, bool) {
	base, ok := strings.CutSuffix(name, segExt)
	if !ok || len(base) != 8 {
		return 0, false
	}
	n, err := strconv.ParseUint(base, 10, 32)
	return uint32(n), err == nil
}

// segments is the store's set of segment files: one active file that
// writes append to (a new one past the target size, and at each Open), and
// read handles of the others. Deleting a segment (GC) waits until no
// reader that began before the deletion was decided is still reading
// (reader epochs), since such a reader may hold pointers into it.
type segments struct {
	dir    string
	target int64 // a write goes to a new file once the active one has this many bytes
	never  bool  // SyncNever: no fsync, not even of a file rotated out
	stageN int   // the staging buffer's size; 0: no O_DIRECT (asked, or the file system refused it)
	// refused is set when the file system refused O_DIRECT (read without the
	// writer's lock by Store.DirectWrites and the metrics).
	refused atomic.Bool

	mu       sync.Mutex
	nextID   uint32
	active   *os.File
	activeID uint32
	size     int64          // bytes in the active file
	dirty    bool           // the active file has writes not yet fsync'ed
	writing  map[uint32]int // writes appended and not yet indexed, per segment
	iov      [][]byte       // writev's scratch
	dio      *directWriter  // the active file's O_DIRECT writer; nil: written with writev
	stage    []byte         // O_DIRECT's staging buffer (mapped at the first file), stageN bytes
	staged   atomic.Int64   // len(stage) once it was mapped: the buffer's resident peak

	rmu     sync.RWMutex
	readers map[uint32]*os.File

	emu     sync.Mutex
	epoch   uint64
	reading map[uint64]int // readers in progress, by the epoch they began in
	doomed  []doomedSeg
}

type doomedSeg struct {
	id    uint32
	epoch uint64 // readers of this epoch or later cannot point into it
}

// openSegments lists the segment files in dir; the first write creates a
// new one after the highest.
// stage is the staging buffer's size for O_DIRECT writes (0: write
// through the page cache).
func openSegments(dir string, target int64, policy SyncPolicy, stage int64) (*segments, error) {
	ss := &segments{dir: dir, target: target, never: policy == SyncNever, nextID: 1, writing: map[uint32]int{},
		readers: map[uint32]*os.File{}, reading: map[uint64]int{},
		stageN: int(stage &^ (dioAlign - 1))}
	ids, err := listSegments(dir)
	if err != nil {
		return nil, err
	}
	if n := len(ids); n > 0 {
		ss.nextID = ids[n-1] + 1
	}
	return ss, nil
}

// scanDir returns pick's value for each entry of dir it picks, in name
// order: no entries and no error when dir does not exist yet (a new store).
func scanDir[T any](dir string, pick func(fs.DirEntry) (T, bool)) ([]T, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []T
	for _, e := range ents {
		if v, ok := pick(e); ok {
			out = append(out, v)
		}
	}
	return out, nil
}

// listSegments returns the ids of the segment files in dir, ascending
// (ReadDir sorts by name, and names are zero-padded ids).
func listSegments(dir string) ([]uint32, error) {
	return scanDir(dir, func(e fs.DirEntry) (uint32, bool) { return segID(e.Name()) })
}

// appendParts writes values given in pieces (event values back to back)
// to the active segment, through the staging buffer under O_DIRECT or
// with writev(2) straight from them (at most IOV_MAX pieces a call),
// after rotating to a new file when the active one is past
// the target size, and fsyncs it when sync is set. It returns the segment
// and the offset the first piece starts at; the caller indexes the values
// and then calls indexed(seg).
func (ss *segments) appendParts(parts [][]byte, sync bool) (uint32, int64, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.active == nil || ss.size >= ss.target {
		if err := ss.rotate(); err != nil {
			return 0, 0, err
		}
	}
	id, off := ss.activeID, ss.size
	var err error
	if ss.dio != nil {
		err = ss.writeDirect(parts)
	} else {
		err = ss.writev(parts)
	}
	if err == nil && sync {
		err = ss.syncLocked()
	}
	if err != nil {
		// What was written of parts is unindexed garbage; start a new file
		// rather than write after a hole the kernel may have left.
		_ = ss.active.Close()
		ss.active, ss.dio = nil, nil
		return 0, 0, fmt.Errorf("segment %s: %w", segName(id), err)
	}
	ss.writing[id]++
	return id, off, nil
}

// iovMax is Linux's IOV_MAX.
const iovMax = 1024

func (ss *segments) writev(in [][]byte) error {
	fd := int(ss.active.Fd())
	// A copy: a piece written in part is cut here, not in the caller's.
	parts := append(ss.iov[:0], in...)
	defer func() {
		clear(ss.iov[:cap(ss.iov)]) // no reference to the caller's buffers
	}()
	ss.iov = parts
	for len(parts) > 0 {
		for len(parts) > 0 && len(parts[0]) == 0 {
			parts = parts[1:]
		}
		if len(parts) == 0 {
			break
		}
		chunk := parts[:min(len(parts), iovMax)]
		n, err := unix.Writev(fd, chunk)
		if n > 0 {
			ss.size += int64(n)
			ss.dirty = true
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		// Skip what was written; a piece written in part is resumed.
		for n > 0 {
			if n >= len(parts[0]) {
				n -= len(parts[0])
				parts = parts[1:]
			} else {
				parts[0] = parts[0][n:]
				n = 0
			}
		}
	}
	return nil
}

// indexed ends a write appendParts began (its index entries are written
// or it failed).
func (ss *segments) indexed(id uint32) {
	ss.mu.Lock()
	if ss.writing[id]--; ss.writing[id] <= 0 {
		delete(ss.writing, id)
	}
	ss.mu.Unlock()
}

// rotate closes the active file (finishActive), and creates the next one
// with its header.
func (ss *segments) rotate() error {
	if err := ss.finishActive(); err != nil {
		return err
	}
	id := ss.nextID
	var h [segHeaderSize]byte
	copy(h[:], segMagic)
	binary.LittleEndian.PutUint32(h[8:], segVersion)
	binary.LittleEndian.PutUint32(h[12:], id)
	f, dio, err := ss.create(filepath.Join(ss.dir, segName(id)), h[:])
	if err != nil {
		return err
	}
	ss.nextID++
	ss.active, ss.dio, ss.activeID, ss.size, ss.dirty = f, dio, id, segHeaderSize, true
	return nil
}

// finishActive closes the active file, if any: cut to its values' end
// (O_DIRECT wrote whole blocks), then fsync'ed unless the policy is
// SyncNever (the interval policy's background sync sees the active file
// only).
func (ss *segments) finishActive() error {
	if ss.active == nil {
		return nil
	}
	var err error
	if ss.dio != nil {
		err = ss.active.Truncate(ss.size)
	}
	if err == nil && ss.dirty && !ss.never {
		err = ss.syncLocked()
	}
	if cerr := ss.active.Close(); err == nil {
		err = cerr
	}
	ss.active, ss.dio = nil, nil
	return err
}

func (ss *segments) syncLocked() error {
	if err := unix.Fdatasync(int(ss.active.Fd())); err != nil {
		return err
	}
	ss.dirty = false
	return nil
}

// sync fsyncs the active file if it has unsynced writes (the interval
// policy's background sync; rotated files were synced when rotated).
func (ss *segments) sync() error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.active == nil || !ss.dirty {
		return nil
	}
	return ss.syncLocked()
}

// close fsyncs (unless the policy is SyncNever) and closes the active
// file, and closes every read handle.
func (ss *segments) close() error {
	ss.mu.Lock()
	err := ss.finishActive()
	ss.releaseStage()
	ss.mu.Unlock()
	ss.rmu.Lock()
	for id, f := range ss.readers {
		f.Close()
		delete(ss.readers, id)
	}
	ss.rmu.Unlock()
	return err
}

// beginRead registers a reader (a cursor batch, a listing): segments
// deleted after it began are kept until it ends. Pass the result to
// endRead.
func (ss *segments) beginRead() uint64 {
	ss.emu.Lock()
	e := ss.epoch
	ss.reading[e]++
	ss.emu.Unlock()
	return e
}

func (ss *segments) endRead(e uint64) {
	ss.emu.Lock()
	if ss.reading[e]--; ss.reading[e] <= 0 {
		delete(ss.reading, e)
	}
	ss.emu.Unlock()
}

// read reads the value p points to into buf (grown as needed) and checks
// its checksum. The caller has begun a read.
func (ss *segments) read(p valuePtr, buf []byte) ([]byte, error) {
	f, err := ss.reader(p.seg)
	if err != nil {
		return buf, err
	}
	if cap(buf) < int(p.n) {
		buf = make([]byte, p.n)
	}
	buf = buf[:p.n]
	if _, err := f.ReadAt(buf, p.off); err != nil {
		return buf, fmt.Errorf("segment %s offset %d: reading %d bytes: %w", segName(p.seg), p.off, p.n, err)
	}
	if got := crc32.Checksum(buf, castagnoli); got != p.crc {
		return buf, schemas.Errorf("store segment", "value", p.off, schemas.ErrCRCMismatch,
			"segment %s offset %d: %d bytes with CRC-32C %08x, the index says %08x", segName(p.seg), p.off, p.n, got, p.crc)
	}
	return buf, nil
}

// reader returns the read handle of segment id, opening it (and checking
// its header) on first use.
func (ss *segments) reader(id uint32) (*os.File, error) {
	ss.rmu.RLock()
	f := ss.readers[id]
	ss.rmu.RUnlock()
	if f != nil {
		return f, nil
	}
	ss.rmu.Lock()
	defer ss.rmu.Unlock()
	if f := ss.readers[id]; f != nil {
		return f, nil
	}
	path := filepath.Join(ss.dir, segName(id))
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("segment %s: %w", segName(id), err)
	}
	var h [segHeaderSize]byte
	if _, err := f.ReadAt(h[:], 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("segment %s: header: %w", segName(id), err)
	}
	if string(h[:8]) != segMagic || binary.LittleEndian.Uint32(h[12:]) != id {
		f.Close()
		return nil, schemas.Errorf("store segment", "header", 0, schemas.ErrBadHeader, "%s is not segment %d (magic %q, id %d)", segName(id), id, h[:8], binary.LittleEndian.Uint32(h[12:]))
	}
	if v := binary.LittleEndian.Uint32(h[8:]); v != segVersion {
		f.Close()
		return nil, fmt.Errorf("segment %s: %w: segment format version %d, this build reads version %d", segName(id), ErrStoreVersion, v, segVersion)
	}
	ss.readers[id] = f
	return f, nil
}

// snapshot returns the segments no write can still add index entries to:
// every one before the active file that has no write between its append
// and its indexing. A scan of the index that begins after snapshot sees
// every entry into them.
func (ss *segments) snapshot() map[uint32]bool {
	ids, _ := listSegments(ss.dir)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	out := map[uint32]bool{}
	for _, id := range ids {
		if (ss.active != nil && id >= ss.activeID) || (ss.active == nil && id >= ss.nextID) || ss.writing[id] > 0 {
			continue
		}
		out[id] = true
	}
	return out
}

// doom marks segments for deletion: they are removed once every reader
// that began before now has ended (reap).
func (ss *segments) doom(ids []uint32) {
	if len(ids) == 0 {
		ss.reap() // those doomed before whose readers have ended since
		return
	}
	ss.emu.Lock()
	ss.epoch++
	for _, id := range ids {
		ss.doomed = append(ss.doomed, doomedSeg{id: id, epoch: ss.epoch})
	}
	ss.emu.Unlock()
	ss.reap()
}

// reap deletes the doomed segments no reader can still point into and
// returns how many.
func (ss *segments) reap() int {
	ss.emu.Lock()
	oldest := ss.epoch + 1
	for e := range ss.reading {
		oldest = min(oldest, e)
	}
	var gone []uint32
	keep := ss.doomed[:0]
	for _, d := range ss.doomed {
		if d.epoch <= oldest {
			gone = append(gone, d.id)
		} else {
			keep = append(keep, d)
		}
	}
	ss.doomed = keep
	ss.emu.Unlock()
	for _, id := range gone {
		ss.rmu.Lock()
		if f := ss.readers[id]; f != nil {
			f.Close()
			delete(ss.readers, id)
		}
		ss.rmu.Unlock()
		_ = os.Remove(filepath.Join(ss.dir, segName(id)))
	}
	return len(gone)
}

// fileSize is the size of segment id's file (0 if it is gone).
func (ss *segments) fileSize(id uint32) int64 {
	st, err := os.Stat(filepath.Join(ss.dir, segName(id)))
	if err != nil {
		return 0
	}
	return st.Size()
}

// eventValue calls fn with the event value under item: read from its
// segment file into *buf (grown as needed) when item holds a pointer, or
// as badger holds it when it holds the value itself (stores written before
// segment files; badger then reads it through its mapped value log, which
// the trimmer is told of). The value is valid only during fn.
func (s *Store) eventValue(item *badger.Item, buf *[]byte, fn func(v []byte) error) error {
	return item.Value(func(v []byte) error {
		if len(v) > 0 && v[0] != ValueVersion && v[0] != ptrVersion {
			return schemas.Errorf("store index", "version", 0, schemas.ErrBadVersion,
				"entry version %d, this build reads versions %d (an event value) and %d (a segment pointer)", v[0], ValueVersion, ptrVersion)
		}
		if !isPtr(v) {
			s.trim.touched(int64(len(v)))
			return fn(v)
		}
		p, err := parsePtr(v)
		if err != nil {
			return err
		}
		b, err := s.segs.read(p, *buf)
		*buf = b
		if err != nil {
			return err
		}
		return fn(b)
	})
}

// valueSize is the size of the event value under item, from the index
// alone.
func valueSize(item *badger.Item) (int64, error) {
	if item.ValueSize() != ptrSize {
		return item.ValueSize(), nil
	}
	var n int64
	err := item.Value(func(v []byte) error {
		if !isPtr(v) {
			n = int64(len(v))
			return nil
		}
		p, err := parsePtr(v)
		n = int64(p.n)
		return err
	})
	return n, err
}
