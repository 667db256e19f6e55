package builder

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// Assigned mode (Config.Assigned): a farm builder unit builds the event
// ids of the assignments the event manager gave it, which complete out of
// order and may name old ids again (a reassigned range arrives late by
// design), so the reference and the late window of a single node do not
// apply. See the package doc, "Farm assignments".

// Range is a run of consecutive event ids, First .. First+N-1 (N >= 1).
type Range struct {
	First uint64
	N     uint32
}

// Last is the range's last id.
func (r Range) Last() uint64 { return r.First + uint64(r.N) - 1 }

// Assignment is work for a builder in assigned mode: the event ids it is to
// build, as ascending ranges that do not overlap, under the farm's
// assignment id.
type Assignment struct {
	ID     uint64
	Ranges []Range
}

// Why an assignment is done (AssignmentReport.Reason).
const (
	DoneBuilt  = "built"  // every id was built
	DoneIdle   = "idle"   // no new event of it opened for Config.Timeout
	DoneClosed = "closed" // the builder closed
	DoneSealed = "sealed" // Seal: no more fragments will come
)

// AssignmentReport is what became of an assignment, given to
// Config.OnAssignmentDone once every event built for it was delivered on
// Batches().
type AssignmentReport struct {
	ID       uint64
	Reason   string  // DoneBuilt, DoneIdle or DoneClosed
	Events   int     // ids in the assignment
	Built    int     // events built and delivered: Events = Built + ids in Missing
	Complete int     // of them with every expected source
	Missing  []Range // ids no fragment arrived for; fragments for them from now on are late
}

// assignment is the state of one expected assignment.
type assignment struct {
	id      uint64
	ranges  []Range
	base    []uint64 // bit index of each range's first id
	bits    []uint64 // ids emitted
	n       int
	emitted int
	pending int // events opened for it and not yet delivered
	built   int
	full    int // events built complete
	last    time.Time
	done    string // why it is done ("" while expected)
	missing []Range
}

// bit returns the bit index of id in a, or false when a does not hold it.
func (a *assignment) bit(id uint64) (uint64, bool) {
	i := sort.Search(len(a.ranges), func(i int) bool { return a.ranges[i].Last() >= id })
	if i == len(a.ranges) || a.ranges[i].First > id {
		return 0, false
	}
	return a.base[i] + (id - a.ranges[i].First), true
}

func (a *assignment) emittedBit(bit uint64) bool { return a.bits[bit/64]&(1<<(bit%64)) != 0 }

// span is one range of a live assignment, in the index.
type span struct {
	first, last uint64
	a           *assignment
}

// assignments indexes the live assignments by id and their ranges by
// first id (disjoint, so a binary search finds an id's assignment).
type assignments struct {
	spans   []span
	live    map[uint64]*assignment
	ids     int // ids of the live assignments
	reports []AssignmentReport
}

// find returns the live assignment holding id, or nil.
func (s *assignments) find(id uint64) *assignment {
	i := sort.Search(len(s.spans), func(i int) bool { return s.spans[i].last >= id })
	if i == len(s.spans) || s.spans[i].first > id {
		return nil
	}
	return s.spans[i].a
}

// checkRanges validates an assignment's ranges and returns its number of ids.
func checkRanges(a Assignment) (int, error) {
	if len(a.Ranges) == 0 {
		return 0, fmt.Errorf("%w: assignment %d has no range", ErrAssignment, a.ID)
	}
	n := 0
	for i, r := range a.Ranges {
		if r.N == 0 {
			return 0, fmt.Errorf("%w: assignment %d: range %d is empty", ErrAssignment, a.ID, i)
		}
		if r.First > math.MaxUint64-uint64(r.N-1) {
			return 0, fmt.Errorf("%w: assignment %d: range %d (%d, %d ids) runs past 2^64-1", ErrAssignment, a.ID, i, r.First, r.N)
		}
		if i > 0 && r.First <= a.Ranges[i-1].Last() {
			return 0, fmt.Errorf("%w: assignment %d: range %d starts at %d, not after range %d's last id %d", ErrAssignment, a.ID, i, r.First, i-1, a.Ranges[i-1].Last())
		}
		n += int(r.N)
		if n > MaxAssignedIDs {
			return 0, fmt.Errorf("%w: assignment %d has more than %d ids", ErrAssignment, a.ID, MaxAssignedIDs)
		}
	}
	return n, nil
}

// Expect gives the builder (Config.Assigned) an assignment: from now on,
// fragments for its ids open events; a fragment for an id in no expected
// assignment is discarded ("unassigned", or "late" when the id was built
// or given up recently). The assignment is done, and reported to
// Config.OnAssignmentDone, when every id was built, or when no new event of
// it opened for Config.Timeout, or at Close. Errors: ErrNotAssigned;
// ErrAssignment (ranges empty, unordered or overlapping, an id already
// expected in another live assignment, the assignment id already live, or
// more than MaxAssignedIDs ids live at once); ErrClosed. Safe for
// concurrent use.
func (b *Builder) Expect(a Assignment) error {
	if !b.cfg.Assigned {
		return ErrNotAssigned
	}
	n, err := checkRanges(a)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	s := &b.asg
	if _, dup := s.live[a.ID]; dup {
		return fmt.Errorf("%w: assignment %d is already expected", ErrAssignment, a.ID)
	}
	if s.ids+n > MaxAssignedIDs {
		return fmt.Errorf("%w: assignment %d: %d ids with the %d already expected is more than %d", ErrAssignment, a.ID, n, s.ids, MaxAssignedIDs)
	}
	for _, r := range a.Ranges {
		i := sort.Search(len(s.spans), func(i int) bool { return s.spans[i].last >= r.First })
		if i < len(s.spans) && s.spans[i].first <= r.Last() {
			o := s.spans[i]
			return fmt.Errorf("%w: assignment %d: ids %d..%d overlap ids %d..%d of assignment %d, still expected",
				ErrAssignment, a.ID, r.First, r.Last(), o.first, o.last, o.a.id)
		}
	}
	x := &assignment{id: a.ID, ranges: slices.Clone(a.Ranges), base: make([]uint64, len(a.Ranges)),
		bits: make([]uint64, (n+63)/64), n: n, last: time.Now()}
	var bit uint64
	for i, r := range x.ranges {
		x.base[i] = bit
		bit += uint64(r.N)
		s.spans = append(s.spans, span{first: r.First, last: r.Last(), a: x})
	}
	slices.SortFunc(s.spans, func(p, q span) int {
		if p.first < q.first {
			return -1
		}
		if p.first > q.first {
			return 1
		}
		return 0
	})
	s.live[a.ID] = x
	s.ids += n
	b.signal() // a new idle deadline
	b.checkLocked("Expect")
	return nil
}

// openAssignedLocked is classifyLocked's counterpart in assigned mode: it
// returns the event to place a fragment of id in, or (nil, true) when the
// fragment was discarded (counted), or (nil, false) when it must wait for
// room.
func (b *Builder) openAssignedLocked(src int32, id uint64, size int, ref *pktRef, now *time.Time) (*event, bool) {
	a := b.asg.find(id)
	if a == nil {
		if b.emitted.has(id) {
			b.lateLocked(id, 0, src)
			b.discardLocked(rLate, ref)
		} else {
			b.discardLocked(rUnassigned, ref)
		}
		return nil, true
	}
	if bit, _ := a.bit(id); a.emittedBit(bit) {
		b.lateLocked(id, 0, src)
		b.discardLocked(rLate, ref)
		return nil, true
	}
	if !b.roomLocked(1, int64(size)) {
		return nil, false
	}
	ev := b.openLocked(id, 0, now)
	ev.asg = a
	a.pending++
	a.last = ev.first
	return ev, true
}

// emittedAssignedLocked records that ev, of assignment a, was emitted.
func (b *Builder) emittedAssignedLocked(ev *event) {
	a := ev.asg
	b.emitted.mark(ev.key, false)
	if a.done != "" {
		return
	}
	if bit, ok := a.bit(ev.key); ok && !a.emittedBit(bit) {
		a.bits[bit/64] |= 1 << (bit % 64)
		a.emitted++
	}
	if a.emitted == a.n {
		b.finishAssignmentLocked(a, DoneBuilt)
	}
}

// finishAssignmentLocked ends an assignment: its ids are no longer
// expected (those never seen are given up: missing, and late from now on);
// it is reported once its events are delivered.
func (b *Builder) finishAssignmentLocked(a *assignment, why string) {
	s := &b.asg
	a.done = why
	s.spans = slices.DeleteFunc(s.spans, func(p span) bool { return p.a == a })
	delete(s.live, a.id)
	s.ids -= a.n
	for i, r := range a.ranges {
		for j := uint64(0); j < uint64(r.N); {
			if a.emittedBit(a.base[i] + j) {
				j++
				continue
			}
			k := j
			for k < uint64(r.N) && !a.emittedBit(a.base[i]+k) {
				b.emitted.mark(r.First+k, false)
				k++
			}
			a.missing = append(a.missing, Range{First: r.First + j, N: uint32(k - j)})
			j = k
		}
	}
	b.led.EventsMissing += uint64(a.n - a.emitted)
	b.led.AssignmentsDone++
	if a.pending == 0 {
		b.reportLocked(a)
	}
}

// deliveredAssignedLocked accounts one delivered event of ev.asg.
func (b *Builder) deliveredAssignedLocked(ev *event) {
	a := ev.asg
	a.pending--
	a.built++
	if ev.present == b.nsrc {
		a.full++
	}
	if a.done != "" && a.pending == 0 {
		b.reportLocked(a)
	}
}

func (b *Builder) reportLocked(a *assignment) {
	b.asg.reports = append(b.asg.reports, AssignmentReport{
		ID: a.id, Reason: a.done, Events: a.n, Built: a.built, Complete: a.full, Missing: a.missing})
	b.signal()
}

// Seal tells the builder (Config.Assigned) that every fragment of
// assignment id that will come has been given (the farm BU knows when
// every RU sent its data, or died, or its sources are masked): its open
// events are emitted now — incomplete, without the sources that did not
// send — instead of each waiting for Timeout, and the assignment is done
// (DoneSealed; ids without any fragment are missing). Sealing an
// assignment that is done already, or unknown, does nothing. Errors:
// ErrNotAssigned. Safe for concurrent use.
func (b *Builder) Seal(id uint64) error {
	if !b.cfg.Assigned {
		return ErrNotAssigned
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	a := b.asg.live[id]
	if a == nil || b.closed {
		return nil
	}
	for ev := b.head; ev != nil; {
		next := ev.next
		if ev.asg == a {
			b.retireLocked(ev)
		}
		ev = next
	}
	if a.done == "" {
		b.finishAssignmentLocked(a, DoneSealed)
	}
	b.signal()
	b.checkLocked("Seal")
	return nil
}

// expireAssignmentsLocked ends the assignments idle for Timeout, or all of
// them (closing). Their events have timed out before them: an event times
// out Timeout after it opened, and an assignment Timeout after its latest
// event opened.
func (b *Builder) expireAssignmentsLocked(now time.Time, all bool) {
	for _, a := range b.asg.live {
		switch {
		case all:
			b.finishAssignmentLocked(a, DoneClosed)
		case now.Sub(a.last) >= b.cfg.Timeout:
			b.finishAssignmentLocked(a, DoneIdle)
		}
	}
}

// assignmentDeadlineLocked is how long until the next assignment goes idle.
func (b *Builder) assignmentDeadlineLocked(now time.Time, d time.Duration) time.Duration {
	for _, a := range b.asg.live {
		d = min(d, a.last.Add(b.cfg.Timeout).Sub(now))
	}
	return d
}
