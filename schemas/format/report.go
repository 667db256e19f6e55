package format

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Report is what a format's Inspect found in a stream: the figures every
// format has, the format's own Section, and the detail of the first rows.
// In JSON the section sits under its Key after the common fields; the
// fields marked json:"-" tell a text rendering how this format words the
// common lines.
type Report struct {
	Format string `json:"format"` // the Format's Name
	Bytes  int64  `json:"bytes"`  // bytes of the records read
	// Records counts the top-level units read: native fragments or packets,
	// FRD events, full events or ROBs, MDF records, VDIF/Mark 5B frames.
	// For Arrow IPC files they are record batches, for Parquet row groups.
	Records int `json:"records"`
	// Events counts events: those the node builds from the records (VDIF:
	// (second, frame number) events across threads; Mark 5B: frames),
	// rows of an event table.
	Events int `json:"events"`
	// NumSources counts distinct sources: source ids, FED ids, ROB source
	// ids, LHCb (bank type, source id) pairs, VDIF (station, thread) ids,
	// the sources of an event table's source groups.
	NumSources int `json:"n_sources"`
	// Sources lists them, ascending, where they are plain numbers.
	Sources     []uint32  `json:"sources,omitempty"`
	RecordBytes SizeStats `json:"record_bytes"`
	Checksums   Checksums `json:"checksums"`
	// Start and End bound the data in time where the format says (VDIF
	// frame times, ATLAS bunch-crossing times, event arrival times of a
	// table), UTC.
	Start *time.Time `json:"start,omitempty"`
	End   *time.Time `json:"end,omitempty"`
	// Detail describes the first rows (events, fragments, packets, frames),
	// as many as asked for; nil when none were.
	Detail *Detail `json:"detail,omitempty"`

	// Section is the format's own part of the report; nil when it has none.
	Section Section `json:"-"`
	// RecordUnit names what Records counts, in the singular ("frame",
	// "row group"); empty means "record".
	RecordUnit string `json:"-"`
	// EventsText, when set, is the text of the events line, for a format
	// whose records are not its events (VDIF frames).
	EventsText string `json:"-"`
	// SourcesText, when set, is the text of the sources line, for a
	// format that counts or writes its sources its own way.
	SourcesText string `json:"-"`
	// NoRecordSizes says that RecordBytes means nothing for the format
	// (a table's records are batches), so the text leaves it out.
	NoRecordSizes bool `json:"-"`
}

// Section is a format's own part of a Report: what only that format has
// (FRD versions and lumi sections, eformat byte order, LHCb bank types, a
// table's columns). It is marshalled to JSON as it is, under Key.
type Section interface {
	// Key is the section's JSON key, e.g. "lhcb"; formats of one family
	// share theirs ("baseband" for VDIF and Mark 5B).
	Key() string
	// Lines writes the section's lines of the text report, each a key and
	// a value.
	Lines(line LineFunc)
}

// LineFunc writes one "key: value" line of a text report, the value
// formatted as by fmt.Sprintf.
type LineFunc func(key, format string, args ...any)

// Detail is the per-row detail of a report: what a row is (Of), the rows,
// and how they read as a text table. In JSON it is {"of": ..., "rows":
// [...]} for every format, so that tools find the rows at .detail.rows
// whatever the file.
type Detail struct {
	// Of names the rows: "fragments", "packets", "fragments and packets"
	// (native), "events" (CMS, ATLAS full events, LHCb, event tables),
	// "ROB fragments", "frames" (VDIF, Mark 5B) or "rows" (other tables).
	Of string
	// Rows is a slice of the format's row type, marshalled as it is.
	Rows any
	// Table writes the rows as text: first the column names, then each
	// row's cells, through row.
	Table func(row func(cells ...any)) `json:"-"`
}

// MarshalJSON writes {"of": d.Of, "rows": d.Rows}.
func (d *Detail) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Of   string `json:"of"`
		Rows any    `json:"rows"`
	}{d.Of, d.Rows})
}

// MarshalJSON writes the common fields and then, when there is one, the
// section under its key.
func (r *Report) MarshalJSON() ([]byte, error) {
	type plain Report // without this method
	b, err := json.Marshal((*plain)(r))
	if err != nil || r.Section == nil {
		return b, err
	}
	sec, err := json.Marshal(r.Section)
	if err != nil {
		return nil, err
	}
	key, err := json.Marshal(r.Section.Key())
	if err != nil {
		return nil, err
	}
	// b is an object with at least the "format" field: insert before its
	// closing brace.
	b = bytes.TrimSuffix(b, []byte("}"))
	b = append(append(append(append(b, ','), key...), ':'), sec...)
	return append(b, '}'), nil
}

// SizeStats are the minimum, median and maximum record size in bytes.
type SizeStats struct {
	Min    int `json:"min"`
	Median int `json:"median"`
	Max    int `json:"max"`
}

// Checksums counts the checksums checked, by outcome; What says which.
type Checksums struct {
	What   string `json:"what"`
	Valid  int    `json:"valid"`
	Bad    int    `json:"bad"`
	Absent int    `json:"absent,omitempty"` // not written by the writer
}

// Plural writes n and the noun, in the plural unless n is 1 ("batch"
// takes "es"): the wording of counts in reports.
func Plural(n int, noun string) string {
	switch {
	case n == 1:
		return "1 " + noun
	case strings.HasSuffix(noun, "ch"):
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
