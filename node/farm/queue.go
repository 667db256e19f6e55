package farm

import "time"

// pending is announced work not assigned yet: elements of one (run,
// resync, kind), ascending, or a whole reassignment (supersedes != 0),
// which is never merged or split: the same elements go to one new BU.
type pending struct {
	unit       Unit
	supersedes uint64
	since      time.Time // announcement of its oldest element (linger)
}

// workQueue is the EM's pending work, in announcement order, with
// reassignments at the front (the RUs hold their bytes: build them first).
type workQueue struct {
	q        []pending
	head     int
	elements int
}

func (w *workQueue) len() int { return len(w.q) - w.head }

// pushBack queues announced u, merging it into the last entry when it
// continues it (same key, ascending): then one assignment can take
// elements of several announcements.
func (w *workQueue) pushBack(u Unit, now time.Time) {
	w.elements += u.Len()
	if w.len() > 0 {
		t := &w.q[len(w.q)-1]
		if t.supersedes == 0 && t.unit.Run == u.Run && t.unit.Resync == u.Resync && t.unit.Kind == u.Kind &&
			len(t.unit.Ranges) > 0 && u.Ranges[0].First > t.unit.Ranges[len(t.unit.Ranges)-1].Last() {
			t.unit.Ranges = appendRanges(t.unit.Ranges, u.Ranges)
			return
		}
	}
	w.q = append(w.q, pending{unit: Unit{Run: u.Run, Resync: u.Resync, Kind: u.Kind,
		Ranges: append([]Range(nil), u.Ranges...)}, since: now})
}

// appendRanges appends ascending rs to dst (whose last range ends before
// rs[0]), merging a range adjacent to the one before it.
func appendRanges(dst, rs []Range) []Range {
	for _, r := range rs {
		if n := len(dst); n > 0 && !separated(dst[n-1], r) && uint64(dst[n-1].N)+uint64(r.N) < 1<<32 {
			dst[n-1].N += r.N
			continue
		}
		dst = append(dst, r)
	}
	return dst
}

// pushFront queues a reassignment of u (superseding assignment id old)
// ahead of everything.
func (w *workQueue) pushFront(u Unit, old uint64, now time.Time) {
	w.elements += u.Len()
	p := pending{unit: u, supersedes: old, since: now}
	if w.head > 0 {
		w.head--
		w.q[w.head] = p
		return
	}
	w.q = append(w.q, pending{})
	copy(w.q[1:], w.q)
	w.q[0] = p
}

// peek says how many elements the next assignment takes (at most size)
// and whether it may go now: a reassignment always, new work when it is
// full, when nothing more can join it (later work is queued apart), when
// its oldest element waited linger, or when flushing.
func (w *workQueue) peek(size int, now time.Time, linger time.Duration, flush bool) (int, bool) {
	if w.len() == 0 {
		return 0, false
	}
	h := &w.q[w.head]
	n := h.unit.Len()
	if h.supersedes != 0 {
		return n, true
	}
	if n >= size {
		return size, true
	}
	return n, flush || w.len() > 1 || now.Sub(h.since) >= linger
}

// take removes the next assignment's n elements (as peek said) and
// returns them, with the assignment id they supersede (0 for new work).
func (w *workQueue) take(n int) (Unit, uint64) {
	h := &w.q[w.head]
	w.elements -= n
	if h.supersedes != 0 || n >= h.unit.Len() {
		p := *h
		w.q[w.head] = pending{}
		w.head++
		if w.head == len(w.q) {
			w.q, w.head = w.q[:0], 0
		} else if w.head > 1024 && w.head > len(w.q)/2 {
			w.q = append(w.q[:0], w.q[w.head:]...)
			w.head = 0
		}
		return p.unit, p.supersedes
	}
	u := Unit{Run: h.unit.Run, Resync: h.unit.Resync, Kind: h.unit.Kind}
	left := n
	i := 0
	for ; left > 0; i++ {
		r := h.unit.Ranges[i]
		if int(r.N) > left {
			u.Ranges = append(u.Ranges, Range{First: r.First, N: uint32(left)})
			h.unit.Ranges[i] = Range{First: r.First + uint64(left), N: r.N - uint32(left)}
			left = 0
			break
		}
		u.Ranges = append(u.Ranges, r)
		left -= int(r.N)
	}
	h.unit.Ranges = h.unit.Ranges[i:]
	return u, 0
}

// drain removes everything queued (the run stopped).
func (w *workQueue) drain() []pending {
	out := append([]pending(nil), w.q[w.head:]...)
	w.q, w.head, w.elements = w.q[:0], 0, 0
	return out
}
