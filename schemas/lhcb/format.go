package lhcb

import (
	"fmt"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
	"github.com/sluice-daq/sluice/schemas/internal/summary"
)

// The formats, as registered in schemas/formats: MDF records of raw banks,
// and MDF records holding MEPs (the event builder's multi-event packets).
var (
	MDFFormat format.Format = mdfStream{name: FormatMDF, sign: "an LHCb MDF header"}
	MEPFormat format.Format = mdfStream{name: FormatMEP, sign: "an LHCb MDF header holding a MEP", mep: true}
)

// mdfStream is comparable, as formats are: code compares them.
type mdfStream struct {
	name, sign string
	mep        bool // records hold MEPs
}

func (s mdfStream) Name() string { return s.name }
func (s mdfStream) Sign() string { return s.sign }

// Detect is Certain for a valid MDF header (three equal size words, a
// known version, a matching subheader length) of the stream's data type.
func (s mdfStream) Detect(head []byte) format.Match {
	if s.mep && DetectMEP(head) || !s.mep && DetectMDF(head) {
		return format.Certain
	}
	return format.NoMatch
}

// Inspect reads the stream with Inspect and reports it, its per-event
// detail as the report's detail and the rest as the section "lhcb".
func (s mdfStream) Inspect(r *format.Stream, maxEvents int) (*format.Report, error) {
	l, err := Inspect(r.Reader, maxEvents)
	if l == nil {
		return nil, err
	}
	rep := &format.Report{
		Format: l.Format, Bytes: l.Bytes, Records: l.Records, Events: l.Events, NumSources: l.Sources,
		RecordBytes: l.RecordBytes,
		Checksums:   format.Checksums{What: "MDF record checksums", Valid: l.Checksums.Valid, Bad: l.Checksums.Bad, Absent: l.Checksums.Absent},
		SourcesText: fmt.Sprintf("%d readout sources (bank type, source id); %d distinct source ids", l.Sources, l.SourceIDs),
		Section:     l,
	}
	if len(l.Detail) > 0 {
		rows, mep := l.Detail, l.Format == FormatMEP
		rep.Detail = &format.Detail{Of: "events", Rows: rows, Table: func(row func(...any)) { detailTable(rows, mep, row) }}
		l.Detail = nil
	}
	return rep, err
}

// detailTable writes the event rows as text: an MEP's events with the MEP
// record they are in and their banks' bytes rebuilt with bank headers.
func detailTable(rows []EventDetail, mep bool, row func(cells ...any)) {
	if mep {
		row("#", "MEP offset", "MEP bytes", "event in MEP", "bank bytes (rebuilt)", "event number", "run", "orbit", "bunch", "banks", "ODIN")
		for _, e := range rows {
			row(e.Index, e.Offset, e.RecordBytes, e.InRecord, e.BankBytes, e.EventNumber, e.Run, e.Orbit, e.Bunch, e.Banks, e.HasODIN)
		}
		return
	}
	row("#", "offset", "record bytes", "bank bytes", "event number", "run", "orbit", "bunch", "banks", "ODIN")
	for _, e := range rows {
		row(e.Index, e.Offset, e.RecordBytes, e.BankBytes, e.EventNumber, e.Run, e.Orbit, e.Bunch, e.Banks, e.HasODIN)
	}
}

// Key is the section's JSON key.
func (*Report) Key() string { return "lhcb" }

// Lines writes the section's text lines.
func (l *Report) Lines(line format.LineFunc) {
	line("raw banks", "%d; by type %s", l.Banks, summary.CountMap(l.BanksByType))
	line("MDF header versions", "%s", summary.CountMap(l.HeaderVersions))
	line("compressed records", "%d", l.Compressed)
	line("runs", "%s", schemas.FormatSourceList(l.Runs))
	line("ODIN event numbers", "%d .. %d", l.EventNumbers[0], l.EventNumbers[1])
	if len(l.PackingFactors) > 0 {
		line("packing factors", "%v", l.PackingFactors)
	}
}
