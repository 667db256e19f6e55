package storage

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Segment files are written with O_DIRECT: the values go from the staging
// buffer to the device without a copy into the kernel's page cache. On a
// node that copy is the most expensive of the stored bytes' (a fresh
// page-cache page costs the kernel allocation, accounting and a cold copy:
// buffered writes measured ~1.5 ns/B of system time here against ~0.25
// ns/B direct), and the page cache it fills counts against the node's
// memory cgroup. Values reach the staging buffer by one copy from the
// batch's buffers, in cache.
//
// O_DIRECT wants the buffer, the length and the file offset aligned to the
// device's logical block; dioAlign (4 KiB) covers the 512 B and 4 KiB of
// real devices. A write is rounded up to whole blocks with zeros and the
// last, partial block is kept in the staging buffer: the next write
// rewrites that block with the same leading bytes and its own after them,
// so no value ever moves and no padding stays between two writes. (A torn
// rewrite leaves each sector old or new, and the acknowledged bytes are
// the same in both.) The file is cut to its values' end when it is closed;
// a node killed before that leaves zeros past the last value, bytes no
// index entry points at.
//
// A file system that refuses O_DIRECT (tmpfs on older kernels, some
// network file systems) is detected on the first file, by its open or by
// the write of its header block, and the store then writes through the
// page cache with writev(2), as Options.PageCache asks.

// dioAlign is the alignment of O_DIRECT buffers, lengths and offsets.
const dioAlign = 4096

// directWriter appends to one segment file opened with O_DIRECT.
type directWriter struct {
	fd    int
	buf   []byte // the staging buffer (segments.stage): len a multiple of dioAlign, page-aligned
	off   int64  // file offset of buf[0], a multiple of dioAlign
	n     int    // buf[:n] is the file's bytes [off, off+n)
	dirty bool   // buf[:n] has bytes not yet written
}

// end is the file offset after the last byte appended.
func (w *directWriter) end() int64 { return w.off + int64(w.n) }

// write appends parts and writes them out: whole staging buffers as they
// fill, then the rest rounded up to a block.
func (w *directWriter) write(parts [][]byte) error {
	for _, p := range parts {
		for len(p) > 0 {
			// Invariant: w.n < len(w.buf) here; a full buffer is flushed
			// at once and leaves nothing behind.
			c := copy(w.buf[w.n:], p)
			w.n += c
			w.dirty = true
			p = p[c:]
			if w.n == len(w.buf) {
				if err := w.flush(); err != nil {
					return err
				}
			}
		}
	}
	if !w.dirty {
		return nil
	}
	return w.flush()
}

// flush writes buf[:n], zero-filled to a whole block, at off, and keeps
// the last partial block at the front of buf.
func (w *directWriter) flush() error {
	whole := (w.n + dioAlign - 1) &^ (dioAlign - 1)
	clear(w.buf[w.n:whole])
	for done := 0; done < whole; {
		k, err := unix.Pwrite(w.fd, w.buf[done:whole], w.off+int64(done))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("O_DIRECT write of %d bytes at offset %d: %w", whole-done, w.off+int64(done), err)
		}
		if k <= 0 || k%dioAlign != 0 && done+k < whole {
			// The rest would start unaligned (a full disk shortens
			// writes): the caller abandons the file.
			return fmt.Errorf("O_DIRECT write of %d bytes at offset %d wrote %d: %w", whole-done, w.off+int64(done), k, io.ErrShortWrite)
		}
		done += k
	}
	keep := w.n &^ (dioAlign - 1) // whole blocks, not rewritten again
	copy(w.buf, w.buf[keep:w.n])
	w.off += int64(keep)
	w.n -= keep
	w.dirty = false
	return nil
}

// create creates segment file path for writing: with O_DIRECT, its header
// block written (and the returned writer holding the header) while the
// file system takes it, else for writev. The first refusal is final: the
// store writes through the page cache from then on.
func (ss *segments) create(path string, header []byte) (*os.File, *directWriter, error) {
	if ss.stageN > 0 {
		if ss.stage == nil {
			b, err := unix.Mmap(-1, 0, ss.stageN, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
			if err != nil {
				return nil, nil, fmt.Errorf("staging buffer of %d bytes: %w", ss.stageN, err)
			}
			ss.stage = b
			ss.staged.Store(int64(len(b)))
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|unix.O_DIRECT, 0o644)
		if err == nil {
			w := &directWriter{fd: int(f.Fd()), buf: ss.stage, n: copy(ss.stage, header), dirty: true}
			if err = w.flush(); err == nil {
				return f, w, nil
			}
			f.Close()
			if rerr := os.Remove(path); rerr != nil {
				return nil, nil, rerr
			}
		}
		if !errors.Is(err, unix.EINVAL) {
			return nil, nil, err
		}
		ss.stageN = 0 // this file system does not do O_DIRECT
		ss.refused.Store(true)
		ss.releaseStage()
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, nil, err
	}
	if _, err := f.Write(header); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, nil, nil
}

// writeDirect appends parts to the active file through its directWriter.
func (ss *segments) writeDirect(parts [][]byte) error {
	err := ss.dio.write(parts)
	ss.size = ss.dio.end()
	ss.dirty = true
	return err
}

// stagingBytes is the staging buffer's size once it was mapped (after
// the store's close too: a peak), else 0.
func (ss *segments) stagingBytes() int64 { return ss.staged.Load() }

// releaseStage unmaps the staging buffer (the store is closing, or its
// file system refused O_DIRECT).
func (ss *segments) releaseStage() {
	if ss.stage != nil {
		_ = unix.Munmap(ss.stage)
		ss.stage = nil
	}
}
