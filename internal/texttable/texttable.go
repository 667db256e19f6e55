// Package texttable prints name–value tables for operators (the run
// ledger, the replay summary): names left-aligned, so that a part stays
// indented under its total, values right-aligned in one column.
// text/tabwriter aligns every column alike, and right-aligned names lose
// their indentation.
package texttable

import (
	"fmt"
	"io"
	"unicode/utf8"
)

// Table is the rows to print, in order; the zero value is empty.
type Table struct {
	rows [][2]string
}

// Row appends a row: name (leading spaces indent it) and v, printed with
// fmt's %v.
func (t *Table) Row(name string, v any) {
	t.rows = append(t.rows, [2]string{name, fmt.Sprint(v)})
}

// WriteTo prints the rows, two spaces between the columns, and returns the
// bytes written and the writer's first error.
func (t *Table) WriteTo(w io.Writer) (int64, error) {
	nameW, valW := 0, 0
	for _, r := range t.rows {
		nameW, valW = max(nameW, utf8.RuneCountInString(r[0])), max(valW, utf8.RuneCountInString(r[1]))
	}
	var n int64
	for _, r := range t.rows {
		// %-*s pads by runes, as the widths are counted.
		k, err := fmt.Fprintf(w, "%-*s  %*s\n", nameW, r[0], valW, r[1])
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
