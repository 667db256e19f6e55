package shm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"
	"unsafe"

	"github.com/sluice-daq/sluice/internal/prefetch"
)

// ReaderConfig configures a ring reader. Zero values take the defaults.
type ReaderConfig struct {
	HeartbeatInterval time.Duration // default DefaultHeartbeatInterval
	StaleAfter        time.Duration // default DefaultStaleAfter
}

// Reader is the consuming side of a readout ring: what the node's driver
// does. It hands out packets zero-copy, in ring order, and acknowledges ring
// space in that same order however the releases arrive. Next is for one
// goroutine; the release funcs it returns may be called from any goroutine.
type Reader struct {
	m    mapping
	cfg  ReaderConfig
	pid  uint32
	read uint64 // read cursor, free-running bytes; starts at the ack pointer; written by Next's goroutine under mu (push)
	// held, when set, is called by Next's goroutine before each wait for
	// the writer while the ring is about full (less than two coalesced
	// wake-ups' worth free: a writer waiting for space waits for one), with
	// the unacknowledged bytes and the data region's size.
	held func(held, size uint64)
	idle time.Time // last liveness check of the writer
	stop chan struct{}
	beat chan struct{}

	path string      // the ring file
	file os.FileInfo // the ring file as opened, to tell it from a newer ring at the same path

	mu         sync.Mutex
	closed     bool
	writerDead bool      // Next returned ErrWriterDead: nobody else will remove the ring
	out        int       // packets handed out and not released
	base       uint64    // sequence number of pend[head]
	pend       []pending // circular queue of handed-out records not yet acknowledged
	head       int
	n          int
}

// pending is one record handed out: the byte it ends at and whether its
// consumer released it.
type pending struct {
	end  uint64
	done bool
}

// OpenReader attaches to the ring /dev/shm/name as its reader. Reading
// starts at the ack pointer, so packets a previous reader read but did not
// acknowledge are read again. Errors: fs.ErrNotExist (no ring yet: see
// WaitReader), ErrBadRing, ErrReaderAttached.
func OpenReader(name string, cfg ReaderConfig) (*Reader, error) {
	path, err := ringPath(name)
	if err != nil {
		return nil, err
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = DefaultStaleAfter
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("readout ring %s: %w", name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("readout ring %s: %w", name, err)
	}
	if st.Size() < controlSize || st.Size() > controlSize+MaxRingData {
		return nil, fmt.Errorf("readout ring %s: %w: file of %d bytes", name, ErrBadRing, st.Size())
	}
	mem, err := mapFile(f, int(st.Size()), true)
	if err != nil {
		return nil, fmt.Errorf("readout ring %s: mmap: %w", name, err)
	}
	ds, err := checkHeader(mem, st.Size())
	if err != nil {
		unmapQuiet(mem)
		return nil, fmt.Errorf("readout ring %s: %w", name, err)
	}
	r := &Reader{
		m:    mapping{name: name, mem: mem, data: mem[controlSize:], mask: ds - 1},
		cfg:  cfg,
		path: path,
		file: st,
		pid:  uint32(os.Getpid()),
		stop: make(chan struct{}), beat: make(chan struct{}),
		pend: make([]pending, 1024),
	}
	m := &r.m
	for {
		old := m.u32(offReaderPID).Load()
		if old != 0 && peerState(old, m.u64(offReaderBeat).Load(), cfg.StaleAfter) == "" {
			m.unmap()
			return nil, fmt.Errorf("readout ring %s: %w: pid %d", name, ErrReaderAttached, old)
		}
		m.u64(offReaderBeat).Store(uint64(time.Now().UnixNano()))
		if m.u32(offReaderPID).CompareAndSwap(old, r.pid) {
			break
		}
	}
	r.read = m.u64(offAck).Load()
	go heartbeat(m.u64(offReaderBeat), cfg.HeartbeatInterval, r.stop, r.beat)
	return r, nil
}

func unmapQuiet(mem []byte) { (&mapping{mem: mem}).unmap() }

// WaitReader is OpenReader that waits, until ctx ends, for the writer to
// create the ring.
func WaitReader(ctx context.Context, name string, cfg ReaderConfig) (*Reader, error) {
	for {
		r, err := OpenReader(name, cfg)
		if !errors.Is(err, fs.ErrNotExist) {
			return r, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("readout ring %s: waiting for the writer to create it: %w", name, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// nextHeaderBytes is how much of the next record Next prefetches: its
// record header and the first 112 bytes of its packet (an MFP of 10
// fragments: header, sizes and CRCs).
const nextHeaderBytes = 128

// Next returns the next packet, aliasing the ring, and the func that
// releases it (idempotent; the ring space is acknowledged once this and
// every earlier packet are released). It waits for the writer; it returns
// io.EOF after the last packet of a ring the writer closed, ErrWriterDead
// (after every complete packet) when the writer died, ErrBadRing on a
// corrupt record header, or ctx.Err().
func (r *Reader) Next(ctx context.Context) ([]byte, func(), error) {
	m := &r.m
	size := uint64(len(m.data))
	for {
		// Invariant: r.read <= write pointer, and r.read is at a record start.
		if w := m.u64(offWrite).Load(); r.read < w {
			pos := r.read & m.mask
			h := m.data[pos : pos+recordHeaderSize]
			n := uint64(binary.LittleEndian.Uint32(h[0:]))
			switch binary.LittleEndian.Uint32(h[4:]) {
			case recSkip:
				r.push(r.read+size-pos, true)
				continue
			case recPacket:
				if pos+recordHeaderSize+n > size {
					return nil, nil, fmt.Errorf("readout ring %s: %w: record at byte %d claims %d bytes past the end of the data region", m.name, ErrBadRing, pos, n)
				}
				seq := r.push(r.read+recordSize(int(n)), false)
				p := m.data[pos+recordHeaderSize : pos+recordHeaderSize+n : pos+recordHeaderSize+n]
				if next := r.read & m.mask; r.read < w && next+nextHeaderBytes <= size {
					// The next record's header and its packet's headers
					// (an MFP's sizes and CRCs), loaded while this one is
					// decoded: a board's DMA left them in no cache.
					prefetch.Lines(unsafe.Pointer(&m.data[next]), nextHeaderBytes)
				}
				return p, func() { r.release(seq) }, nil
			default:
				return nil, nil, fmt.Errorf("readout ring %s: %w: record at byte %d has kind %d", m.name, ErrBadRing, pos, binary.LittleEndian.Uint32(h[4:]))
			}
		}
		if err := r.wait(ctx); err != nil {
			return nil, nil, err
		}
	}
}

// wait sleeps until the write pointer moves past r.read, the writer closes
// or dies, or ctx ends.
func (r *Reader) wait(ctx context.Context) error {
	m := &r.m
	if r.read < m.u64(offWrite).Load() {
		return nil
	}
	// The writer publishes its last packet before it sets the closed state,
	// so once the state reads closed the write pointer read after it is final.
	if m.u32(offWriterState).Load() == 1 {
		if r.read < m.u64(offWrite).Load() {
			return nil
		}
		return io.EOF
	}
	if size := uint64(len(m.data)); r.held != nil {
		if held := m.u64(offWrite).Load() - m.u64(offAck).Load(); held+2*coalesce(size) > size {
			r.held(held, size)
		}
	}
	// Until a coalesced wake-up's worth is written, or at most
	// coalesceLatency (as a reader asleep in futex would be woken).
	want := r.read + coalesce(uint64(len(m.data)))
	park(coalesceLatency, func() bool {
		return m.u64(offWrite).Load() >= want || m.u32(offWriterState).Load() == 1
	})
	if r.read < m.u64(offWrite).Load() {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if m.u32(offWriterState).Load() == 1 {
		return nil // the next round returns io.EOF
	}
	// Liveness costs a kill(2) and a /proc read: check it only after a
	// poll interval without data.
	if now := time.Now(); now.Sub(r.idle) < pollInterval {
		return nil
	} else {
		r.idle = now
	}
	if why := peerState(m.u32(offWriterPID).Load(), m.u64(offWriterBeat).Load(), r.cfg.StaleAfter); why != "" {
		r.mu.Lock()
		r.writerDead = true
		r.mu.Unlock()
		return fmt.Errorf("readout ring %s: %w: %s", m.name, ErrWriterDead, why)
	}
	return nil
}

// push moves the read cursor to end and queues the handed-out record
// ending there, returning its sequence number; done records (wrap-around
// skips) need no release. The cursor moves under r.mu, with the queue, so
// that a release on another goroutine (and its invariant check) never sees
// a cursor past the last queued record. Only Next's goroutine writes
// r.read, so it reads it without the lock.
func (r *Reader) push(end uint64, done bool) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.read = end
	if r.n == len(r.pend) {
		grown := make([]pending, 2*len(r.pend))
		for i := 0; i < r.n; i++ {
			grown[i] = r.pend[(r.head+i)%len(r.pend)]
		}
		r.pend, r.head = grown, 0
	}
	r.pend[(r.head+r.n)%len(r.pend)] = pending{end: end, done: done}
	r.n++
	if !done {
		r.out++
	}
	seq := r.base + uint64(r.n-1)
	if done {
		r.advance()
	}
	r.checkLocked("push")
	return seq
}

// release marks record seq consumed and acknowledges the contiguous prefix
// of consumed records.
func (r *Reader) release(seq uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if seq < r.base || seq >= r.base+uint64(r.n) {
		return // already acknowledged
	}
	e := &r.pend[(r.head+int(seq-r.base))%len(r.pend)]
	if e.done {
		return // released twice
	}
	e.done = true
	r.out--
	if !r.closed {
		r.advance()
		r.checkLocked("release")
	} else if r.out == 0 {
		r.m.unmap() // the last packet of a detached reader
	}
}

// heldBytes is the ring space read and not yet acknowledged: up to the end
// of the last record handed out (r.read belongs to Next's goroutine, and
// Stats may be called from any).
func (r *Reader) heldBytes() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.n == 0 {
		return 0
	}
	return int64(r.pend[(r.head+r.n-1)%len(r.pend)].end - r.m.u64(offAck).Load())
}

// advance moves the ack pointer over the released prefix; r.mu is held.
func (r *Reader) advance() {
	m := &r.m
	moved := false
	var ack uint64
	for r.n > 0 && r.pend[r.head].done {
		ack = r.pend[r.head].end
		r.head = (r.head + 1) % len(r.pend)
		r.n--
		r.base++
		moved = true
	}
	if !moved {
		return
	}
	m.u64(offAck).Store(ack)
	// As in Writer.Write: the futex word changes only to wake a sleeper,
	// once per sleep.
	if m.u32(offWriterWait).Load() != 0 && ack >= m.u64(offWriterWake).Load() && m.u32(offWriterWait).CompareAndSwap(1, 0) {
		m.u32(offAckSeq).Add(1)
		futexWake(m.u32(offAckSeq))
	}
}

// WriterThrottleNs is the total time the writer has waited for ring space.
func (r *Reader) WriterThrottleNs() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m.mem == nil {
		return 0
	}
	return r.m.u64(offThrottleNs).Load()
}

// Unacknowledged is the number of packets handed out and not yet
// acknowledged (released, or waiting for an earlier packet's release).
func (r *Reader) Unacknowledged() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// Close detaches the reader: unacknowledged packets stay in the ring for
// the next reader, which reads them again. Packets still handed out stay
// mapped (their releases no longer acknowledge anything) and the ring is
// unmapped when the last of them is released. When the writer died and
// every packet it wrote was read and acknowledged, the ring holds nothing
// and its writer cannot remove it, so Close removes the file (unless a new
// writer has already put a new ring at the same path). Not concurrent with
// Next.
func (r *Reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	close(r.stop)
	<-r.beat
	r.m.u32(offReaderPID).CompareAndSwap(r.pid, 0)
	if r.writerDead && r.n == 0 {
		if st, err := os.Stat(r.path); err == nil && os.SameFile(st, r.file) {
			os.Remove(r.path)
		}
	}
	if r.out == 0 {
		return r.m.unmap()
	}
	return nil
}
