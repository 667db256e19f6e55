package farm

import "sort"

// rangeSet is a set of uint64 numbers kept as sorted, merged ranges
// [lo, hi] (inclusive, so a range may end at 2^64-1). Event ids and packet
// sequence numbers arrive mostly dense, so the set stays a few ranges long
// even for a long run; out-of-order completion makes holes that close.
type rangeSet struct {
	r     []span
	count uint64
}

type span struct{ lo, hi uint64 }

// add inserts [lo, hi] and returns how many of its numbers were already in
// the set.
func (s *rangeSet) add(lo, hi uint64) (overlap uint64) {
	// First span that ends at or after lo-1 (it may touch or overlap).
	i := sort.Search(len(s.r), func(i int) bool { return lo == 0 || s.r[i].hi >= lo-1 })
	j := i
	nlo, nhi := lo, hi
	for j < len(s.r) && (hi == ^uint64(0) || s.r[j].lo <= hi+1) {
		a, b := max(s.r[j].lo, lo), min(s.r[j].hi, hi)
		if a <= b {
			overlap += b - a + 1
		}
		nlo, nhi = min(nlo, s.r[j].lo), max(nhi, s.r[j].hi)
		j++
	}
	s.count += (hi - lo + 1) - overlap
	if i == j {
		s.r = append(s.r, span{})
		copy(s.r[i+1:], s.r[i:])
		s.r[i] = span{nlo, nhi}
		return overlap
	}
	s.r[i] = span{nlo, nhi}
	s.r = append(s.r[:i+1], s.r[j:]...)
	return overlap
}

// overlap counts the numbers of [lo, hi] already in the set.
func (s *rangeSet) overlap(lo, hi uint64) uint64 {
	i := sort.Search(len(s.r), func(i int) bool { return s.r[i].hi >= lo })
	var n uint64
	for ; i < len(s.r) && s.r[i].lo <= hi; i++ {
		a, b := max(s.r[i].lo, lo), min(s.r[i].hi, hi)
		n += b - a + 1
	}
	return n
}

// ranges returns up to max of the set's ranges (all when max <= 0).
func (s *rangeSet) ranges(max int) []Range {
	var out []Range
	for _, sp := range s.r {
		if max > 0 && len(out) == max {
			break
		}
		// A span longer than 2^32-1 is cut into Range-sized pieces.
		for lo := sp.lo; ; {
			n := sp.hi - lo + 1
			if n > 1<<32-1 || n == 0 {
				n = 1<<32 - 1
			}
			out = append(out, Range{First: lo, N: uint32(n)})
			if lo+n-1 >= sp.hi || (max > 0 && len(out) == max) {
				break
			}
			lo += n
		}
	}
	return out
}

// gaps calls emit for each part of [lo, hi] not in the set, in order.
func (s *rangeSet) gaps(lo, hi uint64, emit func(lo, hi uint64)) {
	i := sort.Search(len(s.r), func(i int) bool { return s.r[i].hi >= lo })
	cur := lo
	for ; i < len(s.r) && s.r[i].lo <= hi; i++ {
		if s.r[i].lo > cur {
			emit(cur, s.r[i].lo-1)
		}
		if s.r[i].hi >= hi {
			return
		}
		cur = s.r[i].hi + 1
	}
	emit(cur, hi)
}

// subtractUnit returns u's elements not in s (ranges merged as a unit's
// are), and whether any is left.
func subtractUnit(u Unit, s *rangeSet) (Unit, bool) {
	out := Unit{Run: u.Run, Resync: u.Resync, Kind: u.Kind}
	for _, r := range u.Ranges {
		emit := func(lo, hi uint64) {
			out.Ranges = appendRanges(out.Ranges, []Range{{First: lo, N: uint32(hi - lo + 1)}})
		}
		if s == nil {
			emit(r.First, r.Last())
			continue
		}
		s.gaps(r.First, r.Last(), emit)
	}
	return out, len(out.Ranges) > 0
}

// rangeSetOf is the set of rs's numbers.
func rangeSetOf(rs []Range) *rangeSet {
	var s rangeSet
	for _, r := range rs {
		s.add(r.First, r.Last())
	}
	return &s
}

// UnitGaps are u's elements not among ids (in any order; ids outside u are
// left out), as ranges merged as a unit's are, nil when ids cover u: e.g.
// the event ids of an assignment no readout unit sent anything for.
func UnitGaps(u Unit, ids []uint64) []Range {
	var seen rangeSet
	for i := 0; i < len(ids); {
		j := i // ids[i..j] consecutive
		for j+1 < len(ids) && ids[j] != ^uint64(0) && ids[j+1] == ids[j]+1 {
			j++
		}
		seen.add(ids[i], ids[j])
		i = j + 1
	}
	rest, _ := subtractUnit(u, &seen)
	return rest.Ranges
}
