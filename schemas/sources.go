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
// Errors name the offending item.
func ParseSourceList(s string) ([]uint32, error) {
	var out []uint32
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
		for v := a; v <= b; v++ {
			out = append(out, uint32(v))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	uniq := out[:0]
	for i, v := range out {
		if i == 0 || v != out[i-1] {
			uniq = append(uniq, v)
		}
	}
	return uniq, nil
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
