package schemas

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// SourceGroup is a named set of readout sources whose payloads travel in one
// column of an event batch, e.g. one sub-detector ("velo", "scifi", "ecal").
// In an event batch a group's sources are in ascending order (SortGroups);
// a trigger that only needs one sub-detector reads only that group's column.
type SourceGroup struct {
	Name    string
	Sources []uint32
}

// ParseSourceList parses a comma-separated list of source ids and inclusive
// ranges, e.g. "0-511,600,700-703", into ascending ids without duplicates.
// Errors name the offending item. Its result is 4 bytes per id: a caller
// that only counts or compares ids (validation) takes ParseSourceRanges.
func ParseSourceList(s string) ([]uint32, error) {
	rs, err := ParseSourceRanges(s)
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, nil
	}
	out := make([]uint32, 0, CountSources(rs))
	for _, r := range rs {
		for v := uint64(r.Lo); v <= uint64(r.Hi); v++ {
			out = append(out, uint32(v))
		}
	}
	return out, nil
}

// SourceRange is the source ids Lo..Hi, both included.
type SourceRange struct{ Lo, Hi uint32 }

// Len is the number of ids in r (1..2^32).
func (r SourceRange) Len() uint64 { return uint64(r.Hi) - uint64(r.Lo) + 1 }

// ParseSourceRanges parses a source list as ParseSourceList does (the same
// syntax, limits and errors) into its ranges, ascending, with overlapping
// and adjacent ones joined, without listing the ids: its time and memory
// go with the list's items, not with the sources they name.
func ParseSourceRanges(s string) ([]SourceRange, error) {
	var rs []SourceRange
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(item, "-")
		a, err := strconv.ParseUint(strings.TrimSpace(lo), 0, 32)
		if err != nil {
			return nil, fmt.Errorf("source list: %q: not a source id (uint32)", item)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(strings.TrimSpace(hi), 0, 32); err != nil {
				return nil, fmt.Errorf("source list: %q: range end is not a source id (uint32)", item)
			}
			if b < a {
				return nil, fmt.Errorf("source list: %q: range end below its start", item)
			}
			if b-a >= 1<<20 {
				return nil, fmt.Errorf("source list: %q: range of more than 2^20 sources", item)
			}
		}
		rs = append(rs, SourceRange{Lo: uint32(a), Hi: uint32(b)})
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].Lo < rs[j].Lo })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && uint64(r.Lo) <= uint64(out[n-1].Hi)+1 {
			out[n-1].Hi = max(out[n-1].Hi, r.Hi)
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// CountSources is the number of ids in ranges that do not overlap (those
// of ParseSourceRanges).
func CountSources(rs []SourceRange) uint64 {
	var n uint64
	for _, r := range rs {
		n += r.Len()
	}
	return n
}

// FormatSourceList is the inverse of ParseSourceList: ascending ids are
// written with runs folded into ranges ("0-511,600").
func FormatSourceList(ids []uint32) string {
	s := append([]uint32(nil), ids...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var b strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j > i {
			fmt.Fprintf(&b, "%d-%d", s[i], s[j])
		} else {
			fmt.Fprintf(&b, "%d", s[i])
		}
		i = j + 1
	}
	return b.String()
}

// SortGroups returns a copy of groups with each group's sources sorted
// ascending and duplicates removed, the order EventSchema requires.
func SortGroups(groups []SourceGroup) []SourceGroup {
	out := make([]SourceGroup, len(groups))
	for i, g := range groups {
		ids := append([]uint32(nil), g.Sources...)
		sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
		uniq := ids[:0]
		for k, v := range ids {
			if k == 0 || v != ids[k-1] {
				uniq = append(uniq, v)
			}
		}
		out[i] = SourceGroup{Name: g.Name, Sources: uniq}
	}
	return out
}
