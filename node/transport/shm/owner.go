package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// Owner is what a ring file's control page says about the processes using
// it, and what the file system says about the file.
type Owner struct {
	WriterPID   uint32 // 0 if never set
	WriterAlive bool
	ReaderPID   uint32 // 0 when no reader is attached
	ReaderAlive bool
	UID         uint32 // the file's owner
	Bytes       int64  // bytes the file holds in /dev/shm (its allocated blocks)
}

// InUse explains why the ring cannot be reclaimed ("" when it can): a live
// writer or reader that is not this process, or a file of another user.
func (o Owner) InUse() string {
	self := uint32(os.Getpid())
	switch {
	case o.UID != uint32(os.Geteuid()):
		return fmt.Sprintf("the file belongs to uid %d", o.UID)
	case o.WriterAlive && o.WriterPID != self:
		return fmt.Sprintf("its writer pid %d is alive", o.WriterPID)
	case o.ReaderAlive && o.ReaderPID != self:
		return fmt.Sprintf("its reader pid %d is alive", o.ReaderPID)
	}
	return ""
}

// RingOwner reads who uses the ring file at path (a ring in Dir or the
// temporary file of one being created). A file too short to hold a
// control page, or without a ring's magic, has no pids: only its owner
// decides. Errors: fs.ErrNotExist, or the read's.
func RingOwner(path string) (Owner, error) {
	f, err := os.Open(path)
	if err != nil {
		return Owner{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Owner{}, err
	}
	var o Owner
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		o.UID, o.Bytes = sys.Uid, sys.Blocks*512
	}
	page := make([]byte, offReaderPID+4)
	if _, err := io.ReadFull(f, page); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return o, nil
		}
		return o, err
	}
	// Pids are written before the magic, so a temporary file being created
	// names its writer too.
	o.WriterPID = binary.LittleEndian.Uint32(page[offWriterPID:])
	o.ReaderPID = binary.LittleEndian.Uint32(page[offReaderPID:])
	o.WriterAlive, o.ReaderAlive = processAlive(o.WriterPID), processAlive(o.ReaderPID)
	return o, nil
}

// Reclaimed is what ReclaimStale removed.
type Reclaimed struct {
	Files []StaleFile // the ring and temporary files removed
	Bytes int64       // the /dev/shm space they held
	Pids  []uint32    // the dead writers and readers they named, each once
}

// StaleFile is one file ReclaimStale removed: its path, the dead processes
// its control page named (0: none) and the /dev/shm space it held.
type StaleFile struct {
	Path      string
	WriterPID uint32
	ReaderPID uint32
	Bytes     int64
}

// ReclaimStale removes the ring name in Dir, and temporary files of rings
// being created under that name, when they are provably stale: no live
// process other than this one writes or reads them, and they belong to
// this user. A ring in use is left alone and refused with ErrRingInUse
// naming the live pid (a killed node's ring is reclaimed; another live
// node's never is).
func ReclaimStale(name string) (Reclaimed, error) {
	path, err := ringPath(name)
	if err != nil {
		return Reclaimed{}, err
	}
	var r Reclaimed
	tmps, _ := filepath.Glob(filepath.Join(Dir, "."+name+".tmp*"))
	for _, p := range append([]string{path}, tmps...) {
		o, err := RingOwner(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return r, fmt.Errorf("readout ring %s: %w", name, err)
		}
		if why := o.InUse(); why != "" {
			if p != path {
				continue // another live process is creating a ring of this name: not ours to remove
			}
			return r, fmt.Errorf("readout ring %s: %w: %s", name, ErrRingInUse, why)
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return r, fmt.Errorf("readout ring %s: removing the stale ring: %w", name, err)
		}
		r.Files = append(r.Files, StaleFile{Path: p, WriterPID: o.WriterPID, ReaderPID: o.ReaderPID, Bytes: o.Bytes})
		r.Bytes += o.Bytes
		for _, pid := range []uint32{o.WriterPID, o.ReaderPID} {
			if pid != 0 && !slices.Contains(r.Pids, pid) {
				r.Pids = append(r.Pids, pid)
			}
		}
	}
	return r, nil
}
