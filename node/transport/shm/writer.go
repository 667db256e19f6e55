package shm

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sluice-daq/sluice/internal/shmspace"
	"github.com/sluice-daq/sluice/node/transport"
)

// WriterConfig configures a ring writer. Zero values take the defaults.
type WriterConfig struct {
	// DataSize is the data region in bytes, a power of two in
	// [MinRingData, MaxRingData] (default 64 MiB).
	DataSize uint64
	// HeartbeatInterval and StaleAfter: see DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	StaleAfter        time.Duration
	// ReaderGrace is how long a writer waiting for space keeps waiting
	// after its reader died, for a restarted reader to attach, before it
	// returns ErrReaderDead (default DefaultReaderGrace).
	ReaderGrace time.Duration
}

// DefaultReaderGrace is the default WriterConfig.ReaderGrace.
const DefaultReaderGrace = 5 * time.Second

// DefaultRingData is the default data region size.
const DefaultRingData = 64 << 20

// Writer is the producing side of a readout ring: what a readout board's
// DMA engine does. One writer per ring; Write is not safe for concurrent use.
type Writer struct {
	m     mapping
	path  string
	cfg   WriterConfig
	w     uint64 // write pointer; only this writer changes it
	seq   uint64 // records written, for record headers
	stop  chan struct{}
	beat  chan struct{}
	close atomic.Bool
	// throttle keeps ThrottleNs once the ring is unmapped.
	throttle uint64
	// placed counts the packet bytes WritePlaced found in the ring from
	// a lap before and did not write (PlacedBytes).
	placed atomic.Uint64
}

// RingFileBytes is the size in bytes of the file of a ring whose data
// region is data bytes: the control page and the data.
func RingFileBytes(data uint64) uint64 { return controlSize + data }

// CreateWriter creates (replacing any previous file) the ring /dev/shm/name
// and starts its heartbeat. The file appears under its final name only once
// its control page is complete, so a reader never sees half a header.
func CreateWriter(name string, cfg WriterConfig) (*Writer, error) {
	path, err := ringPath(name)
	if err != nil {
		return nil, err
	}
	if cfg.DataSize == 0 {
		cfg.DataSize = DefaultRingData
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = DefaultStaleAfter
	}
	if cfg.ReaderGrace <= 0 {
		cfg.ReaderGrace = DefaultReaderGrace
	}
	ds := cfg.DataSize
	if ds < MinRingData || ds > MaxRingData || ds&(ds-1) != 0 {
		return nil, fmt.Errorf("readout ring %s: data size %d is not a power of two in [%d, %d]", name, ds, MinRingData, uint64(MaxRingData))
	}
	tmp, err := os.CreateTemp(Dir, "."+name+".tmp*")
	if err != nil {
		return nil, fmt.Errorf("readout ring %s: %w", name, err)
	}
	defer os.Remove(tmp.Name()) // no-op once renamed
	defer tmp.Close()
	size := int(RingFileBytes(uint64(ds)))
	// Every page reserved now: a sparse ring would SIGBUS the writer (or
	// the reader) at the first page a full /dev/shm cannot give.
	if err := shmspace.Reserve(tmp, int64(size)); err != nil {
		return nil, fmt.Errorf("readout ring %s: %w", name, err)
	}
	mem, err := mapFile(tmp, size, true)
	if err != nil {
		return nil, fmt.Errorf("readout ring %s: mmap: %w", name, err)
	}
	wr := &Writer{
		m:    mapping{name: name, mem: mem, data: mem[controlSize:], mask: ds - 1},
		path: path, cfg: cfg,
		stop: make(chan struct{}), beat: make(chan struct{}),
	}
	m := &wr.m
	m.u32(offVersion).Store(ringVersion)
	m.u32(offControlSize).Store(controlSize)
	m.u64(offDataSize).Store(ds)
	m.u32(offWriterPID).Store(uint32(os.Getpid()))
	m.u64(offWriterBeat).Store(uint64(time.Now().UnixNano()))
	m.u64(offMagic).Store(ringMagic) // last: marks the header complete
	if err := os.Rename(tmp.Name(), path); err != nil {
		m.unmap()
		return nil, fmt.Errorf("readout ring %s: %w", name, err)
	}
	go heartbeat(m.u64(offWriterBeat), cfg.HeartbeatInterval, wr.stop, wr.beat)
	return wr, nil
}

// MaxPacket is the largest packet Write accepts: a record (header and
// packet) must fit the data region even after a wrap-around skip.
func (wr *Writer) MaxPacket() int { return len(wr.m.data) - recordHeaderSize }

// Write copies packet p into the ring and publishes it. While the ring is
// full it waits (the board's busy/throttle) and adds the time waited to
// ThrottleNs; it never overwrites unacknowledged data. Errors: ctx.Err(),
// transport.ErrPacketTooLarge, or ErrReaderDead when a reader attached and then died
// or stopped its heartbeat while the writer waited.
func (wr *Writer) Write(ctx context.Context, p []byte) error { return wr.write(ctx, p, nil) }

// WritePlaced is Write for a packet replayed from a sample, pl being what
// the caller keeps with it between sends (transport.Placement): when the
// ring still holds its bytes where this write puts them, it writes only
// its first pl.Header bytes (and the record header), as a board's DMA
// costs the node's cores nothing, and evicts the record's cache lines, as
// the board's DMA leaves its bytes in memory and in no core's cache. The
// ring's bytes end up the same as Write's. That is so when the packet was written, with the same length,
// exactly one lap of the ring before: every write since then lay in the
// rest of that lap. To make a pass of the sample that fits in a lap come
// round again at the same places, a packet marked pl.PassStart begins a
// new lap (a skip record fills the rest of this one) when its last write
// began a lap less than a lap ago and the rest of this lap is at most
// 1/passSkipFraction of the ring: a shorter pass is written whole at every
// pass rather than leave most of the ring empty (it would hold a pass or
// two instead of its size). Errors as Write's.
func (wr *Writer) WritePlaced(ctx context.Context, p []byte, pl *transport.Placement) error {
	return wr.write(ctx, p, pl)
}

// passSkipFraction: a pass of a sample starts a new lap (WritePlaced) only
// when that skips at most 1/passSkipFraction of the ring.
const passSkipFraction = 16

// PassComesRound reports whether a pass of a sample that takes pass bytes
// of ring space (the sum of RecordBytes of its packets) comes round at the
// same places in a ring of ringSize data bytes, so that WritePlaced writes
// only the headers of its later passes: it fits a lap and leaves at most
// 1/16 of the lap over (the skip record that starts the next pass on a new
// lap).
func PassComesRound(pass, ringSize uint64) bool {
	return pass > 0 && pass <= ringSize && ringSize-pass <= ringSize/passSkipFraction
}

// PlacedBytes is the number of packet bytes WritePlaced did not write
// because the ring held them from a lap before: the bytes a board's DMA
// would have moved at no cost to the node's cores.
func (wr *Writer) PlacedBytes() uint64 { return wr.placed.Load() }

func (wr *Writer) write(ctx context.Context, p []byte, pl *transport.Placement) error {
	m := &wr.m
	size := uint64(len(m.data))
	rec := recordSize(len(p))
	if len(p) > wr.MaxPacket() {
		return fmt.Errorf("readout ring %s: %w: %d bytes, ring data region %d", m.name, transport.ErrPacketTooLarge, len(p), size)
	}
	pos := wr.w & m.mask
	pad := uint64(0)
	// A pass that began at a lap start less than a lap ago has taken pos
	// bytes so far.
	if pos+rec > size || (pl != nil && pl.PassStart && pos != 0 && PassComesRound(pos, size) &&
		pl.At != 0 && (pl.At-1)&m.mask == 0 && wr.w < pl.At-1+size) {
		pad = size - pos // a record never straddles the end of the region; a pass starts a lap
	}
	if wr.w+pad+rec-m.u64(offAck).Load() > size {
		t0 := time.Now()
		err := wr.waitSpace(ctx, pad+rec)
		m.u64(offThrottleNs).Add(uint64(time.Since(t0)))
		if err != nil {
			return err
		}
	}
	if pad > 0 {
		wr.putHeader(pos, 0, recSkip)
		pos = 0
	}
	start, n := wr.w+pad, len(p)
	if pl != nil {
		if pl.At != 0 && pl.At-1+size == start && pl.Len == len(p) {
			n = min(pl.Header, len(p)) // the rest is there from one lap ago
		}
		pl.At, pl.Len = start+1, len(p)
	}
	wr.putHeader(pos, uint32(len(p)), recPacket)
	copy(m.data[pos+recordHeaderSize:], p[:n])
	if n < len(p) {
		wr.placed.Add(uint64(len(p) - n))
		// As a board's DMA would leave them: in memory, in no core's
		// cache. Else a ring that fits the L3 cache is read from it a lap
		// later, faster than any node reads what its boards wrote.
		evict(unsafe.Pointer(&m.data[pos]), uintptr(rec))
	}
	wr.w = start + rec
	wr.seq++
	m.u64(offWrite).Store(wr.w) // publish: the reader sees header and bytes complete
	wr.check("write")
	// The futex word changes only when a sleeping reader is to be woken: a
	// reader that set its flag after this load re-checks the write pointer
	// before it sleeps (both sides store, then load the other's field).
	// Clearing the flag wakes it once per sleep: until a woken reader
	// runs (late on a loaded machine) later writes would each wake it
	// again, a futex call per packet.
	if m.u32(offReaderWait).Load() != 0 && wr.w >= m.u64(offReaderWake).Load() && m.u32(offReaderWait).CompareAndSwap(1, 0) {
		m.u32(offWriteSeq).Add(1)
		futexWake(m.u32(offWriteSeq))
	}
	return nil
}

func (wr *Writer) putHeader(pos uint64, n, kind uint32) {
	h := wr.m.data[pos : pos+recordHeaderSize]
	binary.LittleEndian.PutUint32(h[0:], n)
	binary.LittleEndian.PutUint32(h[4:], kind)
	binary.LittleEndian.PutUint64(h[8:], wr.seq)
}

// Flush wakes the reader now if it sleeps, instead of when enough data for
// a coalesced wake-up accumulated or its sleep ends: the board's
// end-of-burst interrupt. Call it when no more packets follow for a while.
func (wr *Writer) Flush() {
	if wr.m.u32(offReaderWait).Load() != 0 {
		futexWake(wr.m.u32(offWriteSeq))
	}
}

// waitSpace blocks until need bytes past the write pointer are acknowledged
// free.
func (wr *Writer) waitSpace(ctx context.Context, need uint64) error {
	m := &wr.m
	size := uint64(len(m.data))
	// Ask to be woken once the space needed plus some slack is free.
	wake := wr.w + need - size + min(coalesce(size), size-need)
	idle := time.Now()
	var dead time.Time // when the reader was first seen dead
	for {
		if wr.w+need-m.u64(offAck).Load() <= size {
			return nil
		}
		// Until the slack is free too, or at most coalesceLatency.
		park(coalesceLatency, func() bool { return m.u64(offAck).Load() >= wake })
		if wr.w+need-m.u64(offAck).Load() <= size {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if now := time.Now(); now.Sub(idle) < pollInterval {
			continue // liveness is checked once per poll interval
		} else {
			idle = now
		}
		// No reader attached yet: the board waits for the node to start.
		// A dead reader gets ReaderGrace to be replaced by a new one,
		// which rereads what the dead one did not acknowledge.
		pid := m.u32(offReaderPID).Load()
		why := ""
		if pid != 0 {
			why = peerState(pid, m.u64(offReaderBeat).Load(), wr.cfg.StaleAfter)
		}
		switch {
		case why == "":
			dead = time.Time{}
		case dead.IsZero():
			dead = idle
		case idle.Sub(dead) >= wr.cfg.ReaderGrace:
			return fmt.Errorf("readout ring %s: %w: %s, and no new reader attached within %v", m.name, ErrReaderDead, why, wr.cfg.ReaderGrace)
		}
	}
}

// Drain waits until the reader has acknowledged everything written (or ctx
// ends, or the reader dies), so that a clean shutdown loses nothing.
func (wr *Writer) Drain(ctx context.Context) error {
	return wr.waitSpace(ctx, uint64(len(wr.m.data)))
}

// ThrottleNs is the total time Write waited for ring space, in ns.
func (wr *Writer) ThrottleNs() uint64 {
	if wr.close.Load() {
		return wr.throttle
	}
	return wr.m.u64(offThrottleNs).Load()
}

// Close marks the ring closed (the reader returns io.EOF once it has read
// everything), stops the heartbeat, unmaps the ring and removes its file
// name; a reader that still maps it keeps its view.
func (wr *Writer) Close() error {
	if wr.close.Swap(true) {
		return nil
	}
	m := &wr.m
	wr.throttle = m.u64(offThrottleNs).Load()
	m.u32(offWriterState).Store(1)
	m.u32(offWriteSeq).Add(1)
	futexWake(m.u32(offWriteSeq))
	close(wr.stop)
	<-wr.beat
	err := os.Remove(wr.path)
	if uerr := m.unmap(); err == nil {
		err = uerr
	}
	return err
}
