package shm

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sluice-daq/sluice/node/transport"
)

// Ring layout constants. The ring is one file: a control page followed by
// the data region (see the package documentation for both tables).
const (
	ringMagic        uint64 = 0x31474E4952534C53 // "SLSRING1" on disk
	ringVersion      uint32 = 1
	controlSize             = 4096
	recordHeaderSize        = 16
	recordAlign             = 64
	// MinRingData and MaxRingData bound the data region size (a power of two).
	MinRingData = 1 << 12
	MaxRingData = 1 << 40
)

// Control page offsets. Fields written by different processes live on
// different 64-byte cache lines so the two sides do not false-share.
const (
	offMagic       = 0   // u64
	offVersion     = 8   // u32
	offControlSize = 12  // u32
	offDataSize    = 16  // u64
	offWrite       = 64  // u64 write pointer, free-running bytes
	offWriteSeq    = 72  // u32 futex word: bumped after every publish
	offReaderWait  = 76  // u32: 1 while the reader sleeps on offWriteSeq
	offWriterPID   = 80  // u32
	offWriterState = 84  // u32: 0 writing, 1 closed cleanly
	offWriterBeat  = 88  // u64 writer heartbeat, unix ns
	offThrottleNs  = 96  // u64 total ns the writer waited for space
	offWriterWake  = 112 // u64: the sleeping writer wants a wake-up once ack >= this
	offAck         = 128 // u64 ack pointer, free-running bytes
	offAckSeq      = 136 // u32 futex word: bumped after every ack advance
	offWriterWait  = 140 // u32: 1 while the writer sleeps on offAckSeq
	offReaderPID   = 144 // u32
	offReaderBeat  = 152 // u64 reader heartbeat, unix ns
	offReaderWake  = 160 // u64: the sleeping reader wants a wake-up once write >= this
)

// Record kinds in a record header.
const (
	recPacket uint32 = 1 // a packet follows the header
	recSkip   uint32 = 2 // padding: the rest of this lap is unused
)

// Liveness defaults: heartbeats are written every HeartbeatInterval and a
// side whose heartbeat is older than StaleAfter is considered dead.
const (
	DefaultHeartbeatInterval = 100 * time.Millisecond
	DefaultStaleAfter        = 2 * time.Second
	// pollInterval bounds each futex sleep so that liveness and context
	// cancellation are checked even when no wake-up comes.
	pollInterval = 20 * time.Millisecond
	// Wake-ups are coalesced like a board's interrupts: a sleeping side is
	// woken only once coalesceFraction of the ring (at most coalesceBytes)
	// is ready for it, and otherwise finds what is ready when its sleep of
	// at most coalesceLatency ends. That saves a futex wake and two context
	// switches per packet when one side is faster than the other (a peer
	// asleep in futex; this package's sides park, see park, on the same
	// terms).
	coalesceFraction = 8
	coalesceBytes    = 1 << 20
	coalesceLatency  = time.Millisecond
)

// coalesce is how many bytes a sleeping side waits for on a ring of size.
func coalesce(size uint64) uint64 { return min(size/coalesceFraction, coalesceBytes) }

// Dir is where ring files live; tests may not change it (ring names are
// unique per test instead).
const Dir = "/dev/shm"

// ringPath returns the file of ring name, refusing names that would escape
// Dir.
func ringPath(name string) (string, error) {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return "", fmt.Errorf("%w: ring name %q must be a plain file name", transport.ErrBadURI, name)
	}
	return filepath.Join(Dir, name), nil
}

// mapping is one process's view of a ring file.
type mapping struct {
	name string
	mem  []byte // control page + data region
	data []byte // the data region
	mask uint64 // len(data)-1
}

func (m *mapping) u64(off int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&m.mem[off]))
}

func (m *mapping) u32(off int) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&m.mem[off]))
}

func (m *mapping) unmap() error {
	if m.mem == nil {
		return nil
	}
	err := unix.Munmap(m.mem)
	m.mem, m.data = nil, nil
	return err
}

// mapFile maps size bytes of f shared, read-write; with populate its page
// tables are filled now (see populatePages), not a fault per page in the data
// path.
func mapFile(f *os.File, size int, populate bool) ([]byte, error) {
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil || !populate {
		return mem, err
	}
	populatePages(mem)
	return mem, nil
}

// populateChunk is the part of a mapping one madvise call populates.
const populateChunk = 2 << 20

// populatePages faults mem's pages in (they exist already: shmspace.Reserve
// allocated them) a chunk at a time with MADV_POPULATE_WRITE. Not with
// MAP_POPULATE: that holds the process's mmap lock for the whole mapping,
// and the Go runtime's next mmap (heap growth) waits for it while every
// other thread's page fault waits behind that writer. On a loaded machine
// populating a 64 MiB ring took seconds, all the node's goroutines stopped
// (heartbeats too: make farm's peers declared a node dead right after it
// joined). Between chunks the lock is free. Kernels before 5.14 (EINVAL)
// leave the pages to the first touch, as a ring without populate is.
func populatePages(mem []byte) {
	for off := 0; off < len(mem); off += populateChunk {
		end := min(off+populateChunk, len(mem))
		if err := unix.Madvise(mem[off:end], unix.MADV_POPULATE_WRITE); err != nil {
			return
		}
	}
}

// checkHeader validates the control page of a mapped ring.
func checkHeader(mem []byte, fileSize int64) (uint64, error) {
	if len(mem) < controlSize {
		return 0, fmt.Errorf("%w: file of %d bytes is smaller than the control page", ErrBadRing, len(mem))
	}
	m := &mapping{mem: mem}
	if v := m.u64(offMagic).Load(); v != ringMagic {
		return 0, fmt.Errorf("%w: magic 0x%016x, want 0x%016x", ErrBadRing, v, ringMagic)
	}
	if v := m.u32(offVersion).Load(); v != ringVersion {
		return 0, fmt.Errorf("%w: version %d, this reader knows %d", ErrBadRing, v, ringVersion)
	}
	if v := m.u32(offControlSize).Load(); v != controlSize {
		return 0, fmt.Errorf("%w: control page of %d bytes, want %d", ErrBadRing, v, controlSize)
	}
	ds := m.u64(offDataSize).Load()
	if ds < MinRingData || ds > MaxRingData || ds&(ds-1) != 0 {
		return 0, fmt.Errorf("%w: data size %d is not a power of two in [%d, %d]", ErrBadRing, ds, MinRingData, uint64(MaxRingData))
	}
	if uint64(fileSize) != controlSize+ds {
		return 0, fmt.Errorf("%w: file has %d bytes, header says %d", ErrBadRing, fileSize, controlSize+ds)
	}
	return ds, nil
}

// recordSize is the ring space a packet of n bytes occupies.
// RecordBytes is the ring space in bytes a packet of n bytes takes: its
// record header and the packet, rounded up to the record alignment (64).
func RecordBytes(n int) uint64 { return recordSize(n) }

func recordSize(n int) uint64 {
	return (uint64(n) + recordHeaderSize + recordAlign - 1) &^ (recordAlign - 1)
}

// futexWakeOp is FUTEX_WAKE, on a shared (not process-private) mapping, so
// that a side in this process can wake a peer process (a board's driver, a
// reader or writer in C) that sleeps in FUTEX_WAIT on the ring's words.
const futexWakeOp = 1

// futexWake wakes every sleeper on w.
func futexWake(w *atomic.Uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWakeOp, math.MaxInt32, 0, 0, 0)
}

// park is how this package's sides wait for their peer: the goroutine
// sleeps on Go's timer, in steps from parkStep doubling up to parkStepMax,
// until ready() or d has passed. It never sleeps in futex(2): a thread in a
// system call keeps its P (the Go scheduler's slot for running Go code)
// until the runtime's monitor takes it back, 20 µs to 10 ms later, and on
// a node with two cores the ring's two sides asleep in futex held both Ps
// while the builder's goroutines waited to run (`sluice bench --trace`:
// runnable goroutines and no P for 0.35 s of a 1.9 s run). So a side
// waiting here does not raise its *_waiting flag, and its peer never
// needs to wake it; the flags and futex words stay for peers that do
// sleep in futex.
func park(d time.Duration, ready func() bool) {
	deadline := time.Now().Add(d)
	for step := parkStep; ; step = min(2*step, parkStepMax) {
		time.Sleep(step)
		if ready() || !time.Now().Before(deadline) {
			return
		}
	}
}

// The steps of park: short first (a ring side usually waits for a packet or
// a batch's release, well under a millisecond at full rate), at most 200 µs
// (five checks per coalesceLatency when idle).
const (
	parkStep    = 20 * time.Microsecond
	parkStepMax = 200 * time.Microsecond
)

// processAlive reports whether pid names a running (not zombie) process.
func processAlive(pid uint32) bool {
	if pid == 0 {
		return false
	}
	if err := unix.Kill(int(pid), 0); err == unix.ESRCH {
		return false
	}
	// A killed child stays a zombie until its parent waits for it, and
	// kill(pid, 0) still succeeds on zombies: look at the state field.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !os.IsNotExist(err)
	}
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
		switch b[i+2] {
		case 'Z', 'X', 'x':
			return false
		}
	}
	return true
}

// peerState explains why the other side of a ring is considered dead, or
// returns "" if it is alive.
func peerState(pid uint32, beat uint64, staleAfter time.Duration) string {
	if !processAlive(pid) {
		return fmt.Sprintf("pid %d has exited", pid)
	}
	if age := time.Duration(time.Now().UnixNano() - int64(beat)); age > staleAfter {
		return fmt.Sprintf("pid %d last heartbeat %v ago (stale after %v)", pid, age.Round(time.Millisecond), staleAfter)
	}
	return ""
}

// heartbeat stores the current time into w every interval until stop is
// closed.
func heartbeat(w *atomic.Uint64, interval time.Duration, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			w.Store(uint64(now.UnixNano()))
		}
	}
}
