// Package summary holds what the formats' inspectors share: size
// statistics, counting and wording helpers, bounded record reads, and the
// row of detail of the formats whose records are events or fragments
// (sluice's own, CMS FRD, ATLAS eformat).
package summary

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
)

// SizeStatsOf returns the minimum, median and maximum of sizes (sorted in
// place); zeros for none.
func SizeStatsOf(sizes []int) format.SizeStats {
	if len(sizes) == 0 {
		return format.SizeStats{}
	}
	slices.Sort(sizes)
	return format.SizeStats{Min: sizes[0], Median: sizes[len(sizes)/2], Max: sizes[len(sizes)-1]}
}

// SortedKeys returns the keys of m, ascending; an empty, non-nil slice
// for none (JSON [], not null).
func SortedKeys(m map[uint32]bool) []uint32 {
	out := slices.AppendSeq(make([]uint32, 0, len(m)), maps.Keys(m))
	slices.Sort(out)
	return out
}

// CountMap renders a count map as "k1: n1, k2: n2" in key order.
func CountMap[K interface{ ~int | ~uint8 | ~string }](m map[K]int) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%v: %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// OK writes a checksum's outcome for a table cell.
func OK(ok bool) string {
	if ok {
		return "ok"
	}
	return "BAD"
}

// Dash stands for an empty cell, so that the columns stay readable.
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ReadRecord reads the n-byte record starting at stream offset off into
// buf (reused), growing it as bytes arrive so that a corrupt size on a
// short file costs no more memory than the file. A stream that ends early
// is ErrTruncated at off, named after format.
func ReadRecord(r io.Reader, buf []byte, n uint64, off int64, format string) ([]byte, error) {
	buf = buf[:0]
	for uint64(len(buf)) < n {
		chunk := int(min(n-uint64(len(buf)), 1<<20))
		l := len(buf)
		buf = slices.Grow(buf, chunk)[:l+chunk]
		if m, err := io.ReadFull(r, buf[l:]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || err == io.EOF {
				return buf, schemas.Errorf(format, "record", off, schemas.ErrTruncated, "record of %d bytes, the file ends after %d", n, l+m)
			}
			return buf, err
		}
	}
	return buf, nil
}

// SubdetectorGroups groups ROB source ids (ATLAS eformat: the
// sub-detector in bits 16-23) into one group per sub-detector, named
// subdetXX in hex, in ascending id order, then a group "header" holding
// header (the event header's pseudo-source). ATLAS and BESIII events,
// both eformat, group their sources this way.
func SubdetectorGroups(ids map[uint32]bool, header uint32) []schemas.SourceGroup {
	var groups []schemas.SourceGroup
	for _, id := range SortedKeys(ids) {
		name := fmt.Sprintf("subdet%02x", id>>16&0xFF)
		if len(groups) == 0 || groups[len(groups)-1].Name != name {
			groups = append(groups, schemas.SourceGroup{Name: name})
		}
		g := &groups[len(groups)-1]
		g.Sources = append(g.Sources, id)
	}
	return append(groups, schemas.SourceGroup{Name: "header", Sources: []uint32{header}})
}
