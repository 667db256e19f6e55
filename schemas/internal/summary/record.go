package summary

import "github.com/sluice-daq/sluice/schemas/format"

// Record describes one record of a stream whose records are events or
// fragments: a native fragment or multi-fragment packet, an FRD event, an
// eformat full event or ROB fragment.
type Record struct {
	Kind   string `json:"kind"` // "fragment", "packet", "event" or "ROB fragment"
	Index  int    `json:"index"`
	Offset int64  `json:"offset"`       // of the record in the file
	Bytes  int    `json:"record_bytes"` // the whole record, header included
	// EventID is the record's event id; for a packet, the first of its N
	// consecutive event ids (N is its packing factor).
	EventID    uint64   `json:"event_id"`
	N          int      `json:"n,omitempty"`
	Run        uint32   `json:"run,omitempty"`
	Sources    []uint32 `json:"sources"` // in the record's order
	ChecksumOK bool     `json:"checksum_ok"`
	// ChecksumAbsent: the record carries no checksum (eformat v3.0, or
	// every checksum type "none"); ChecksumOK is then true, as nothing
	// failed, and the table says "no checksum", not "ok".
	ChecksumAbsent bool `json:"checksum_absent,omitempty"`
	// Note says what else matters: bad sub-checksums, status bits, flags.
	Note string `json:"note,omitempty"`
}

// Checksum is the record's checksum cell: "ok", "BAD" or "no checksum".
func (r *Record) Checksum() string {
	if r.ChecksumAbsent {
		return "no checksum"
	}
	return OK(r.ChecksumOK)
}

// Records collects the detail rows of a report, at most Max of them.
type Records struct {
	Max  int
	Rows []Record
	of   string
}

// Add keeps d while fewer than Max rows are kept, and names the rows
// after the kinds seen.
func (rs *Records) Add(d Record) {
	if len(rs.Rows) >= rs.Max {
		return
	}
	switch of := d.Kind + "s"; rs.of {
	case "":
		rs.of = of
	case of:
	default:
		rs.of = "fragments and packets" // the one mix: a native stream
	}
	rs.Rows = append(rs.Rows, d)
}

// Detail returns the rows kept as a report's detail, written as a text
// table by table; nil when none were kept.
func (rs *Records) Detail(table func(rows []Record, row func(cells ...any))) *format.Detail {
	if len(rs.Rows) == 0 {
		return nil
	}
	rows := rs.Rows
	return &format.Detail{Of: rs.of, Rows: rows, Table: func(row func(...any)) { table(rows, row) }}
}

// EventTable writes rows of events (CMS, ATLAS) as a text table, their
// sources written by sources.
func EventTable(sources func([]uint32) string) func(rows []Record, row func(cells ...any)) {
	return func(rows []Record, row func(cells ...any)) {
		row("#", "kind", "offset", "record bytes", "event id", "run", "checksum", "sources", "note")
		for _, e := range rows {
			row(e.Index, e.Kind, e.Offset, e.Bytes, e.EventID, e.Run, e.Checksum(), sources(e.Sources), e.Note)
		}
	}
}
