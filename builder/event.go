package builder

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sluice-daq/sluice/schemas"
)

// pktRef counts the references the builder holds on one caller buffer (a
// fragment or a whole multi-fragment packet). Add* starts it at the number
// of fragments plus one guard reference that Add* itself drops on return,
// so the caller's release runs exactly once, when the last fragment is
// either discarded or copied into a batch, and never under the builder lock.
type pktRef struct {
	n       atomic.Int32
	release func()
}

var refPool = sync.Pool{New: func() any { return new(pktRef) }}

func newRef(release func(), n int) *pktRef {
	if release == nil {
		return nil // nothing to call back: no counting at all
	}
	r := refPool.Get().(*pktRef)
	r.release = release
	r.n.Store(int32(n))
	return r
}

// drop gives up one reference; the last one calls release.
func (r *pktRef) drop() {
	if r == nil || r.n.Add(-1) != 0 {
		return
	}
	rel := r.release
	r.release = nil
	refPool.Put(r)
	rel()
}

// slot states (event mode).
const (
	slotPresent uint8 = 1 << iota
	slotRef           // ref holds the fragment's reference
)

// slot is one source's fragment in an event (event mode): a reference to
// the caller's bytes, copied only at batch assembly, the CRC-32C its
// source sent (checked at assembly, where the bytes are read anyway) and
// its packet's release reference. It is 32 bytes, two to a cache line
// (a pointer and a length rather than a slice header): placing a fragment
// touches one line of its event, where slot, CRC and reference in three
// parallel arrays took three (a ring or TCP packet always has a
// reference), and assembly reads the slots in order.
type slot struct {
	data  unsafe.Pointer // first payload byte (nil for an empty payload)
	ref   *pktRef        // with slotRef: the packet's reference
	n     uint32         // payload length
	crc   uint32         // the CRC-32C the source sent
	state uint8
}

func (s *slot) set(payload []byte, crc uint32, ref *pktRef, state uint8) {
	s.data, s.n, s.crc, s.ref, s.state = unsafe.Pointer(unsafe.SliceData(payload)), uint32(len(payload)), crc, ref, state
}

func (s *slot) payload() []byte { return unsafe.Slice((*byte)(s.data), s.n) }

// tsFrag is one fragment placed in a timeslice. A timeslice may hold many
// per source; they are laid out at assembly by (source, timestamp, arrival).
type tsFrag struct {
	payload []byte
	ref     *pktRef
	ts      uint64 // the fragment's timestamp (its EventID) in ns
	seq     uint64 // arrival order, to keep equal timestamps stable
	src     int32  // source index
	crc     uint32 // the CRC-32C the source sent, checked at assembly
	core    bool   // false: an overlap copy, not counted in the ledger
	dup     bool   // set at assembly: same source and timestamp as an earlier one
}

// event is the state of one event or timeslice from its first fragment to
// its batch. Events are pooled: their flat per-source arrays are allocated
// once, when the pool is empty, and reused (the hot path allocates nothing).
type event struct {
	key     uint64
	epoch   uint32      // counter resets before it (event mode; see identity.go)
	open    bool        // in the table and the FIFO (not yet emitted)
	held    bool        // opened by a suspect fragment and still open: counts against the source's share of MaxSuspectEvents
	suspect bool        // opened by a suspect fragment: counts against MaxSuspectEvents, not MaxOpenEvents, until freed
	opener  int32       // held: the source index that opened it
	judge   bool        // opened suspect or without a reference: judged at its timeout, may be dissolved
	waited  bool        // waited past its timeout for a source behind it (behind.go)
	asg     *assignment // Config.Assigned: the assignment its id belongs to
	first   time.Time   // arrival of the first fragment: timeout start and (event mode) timestamp column
	status  schemas.EventStatus
	present int     // sources that contributed (timeslice: to the core)
	frags   int     // fragments counted in the ledger (core only)
	bytes   int64   // payload bytes referenced (against MaxBufferedBytes)
	gbytes  []int64 // payload bytes per source group

	slots   []slot   // event mode: by source index
	coreN   []uint32 // timeslice mode: core fragments by source index
	tsFrags []tsFrag // timeslice mode: every placement, in arrival order

	prev, next *event // FIFO of open events in order of first arrival

	// Source indexes that sent a duplicate fragment, and those whose
	// fragment came after the event was emitted (while it was ready):
	// rare, so short lists, each index once.
	dups, lates []int32

	// Filled by assembly, read by the accounting after it.
	dupCore int // core fragments found to be duplicates (timeslice mode)
}

// addSource appends src to list unless it holds it already.
func addSource(list []int32, src int32) []int32 {
	for _, s := range list {
		if s == src {
			return list
		}
	}
	return append(list, src)
}

// reset clears e for reuse; slots were already cleared by assembly.
func (e *event) reset() {
	e.status, e.present, e.frags, e.bytes, e.dupCore = 0, 0, 0, 0, 0
	e.epoch, e.held, e.suspect, e.judge, e.waited, e.asg = 0, false, false, false, false, nil
	e.dups, e.lates = e.dups[:0], e.lates[:0]
	clear(e.gbytes)
	clear(e.coreN)
	clear(e.tsFrags) // drop payload references for the garbage collector
	e.tsFrags = e.tsFrags[:0]
	e.prev, e.next = nil, nil
}
