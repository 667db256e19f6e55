package lhcb

import (
	"fmt"
	"io"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
	"github.com/sluice-daq/sluice/schemas/internal/summary"
)

// The formats, as registered in schemas/formats: MDF records of raw banks
// (detect, inspect, split, join: export "mdf"), and MDF records holding
// MEPs, the event builder's multi-event packets (detect, inspect, split).
var (
	MDFFormat format.Format = mdfFormat{}
	MEPFormat format.Format = mepFormat{}
)

type mdfFormat struct{ stream }
type mepFormat struct{ stream }

var (
	_ format.Joiner   = mdfFormat{}
	_ format.Splitter = mdfFormat{}
	_ format.Splitter = mepFormat{}
)

func (mdfFormat) Name() string { return FormatMDF }
func (mdfFormat) Sign() string { return "an LHCb MDF header" }
func (mepFormat) Name() string { return FormatMEP }
func (mepFormat) Sign() string { return "an LHCb MDF header holding a MEP" }

// Detect is Certain for a valid MDF header (three equal size words, a
// known version, a matching subheader length) of raw banks (DetectMDF).
func (mdfFormat) Detect(head []byte) format.Match { return certain(DetectMDF(head)) }

// Detect is Certain for a valid MDF header of a MEP (DetectMEP).
func (mepFormat) Detect(head []byte) format.Match { return certain(DetectMEP(head)) }

func certain(ok bool) format.Match {
	if ok {
		return format.Certain
	}
	return format.NoMatch
}

// ExportName is "mdf".
func (mdfFormat) ExportName() string { return "mdf" }

// NewJoiner returns a Joiner writing uncompressed records.
func (mdfFormat) NewJoiner() format.EventJoiner { return NewJoiner() }

// stream is what MDF and MEP streams share: they inspect and split alike,
// event by event (ForEachEvent reads both).
type stream struct{}

// Inspect reads the stream with Inspect and reports it, its per-event
// detail as the report's detail and the rest as the section "lhcb".
func (stream) Inspect(r *format.Stream, maxEvents int) (*format.Report, error) {
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

// Sources scans the stream (ScanSources) and groups its sources by bank
// type, in ascending type: group "bank<type>" holds the (type, source id)
// sources of that type (SourceID), group "header" the header fragment's
// HeaderSource.
func (stream) Sources(r io.Reader) ([]schemas.SourceGroup, error) {
	ids, err := ScanSources(r)
	if err != nil {
		return nil, err
	}
	var groups []schemas.SourceGroup
	for _, id := range ids { // ascending: by type, HeaderSource last
		name := "header"
		if typ, _, ok := SplitSourceID(id); ok {
			name = fmt.Sprintf("bank%d", typ)
		}
		if len(groups) == 0 || groups[len(groups)-1].Name != name {
			groups = append(groups, schemas.SourceGroup{Name: name})
		}
		g := &groups[len(groups)-1]
		g.Sources = append(g.Sources, id)
	}
	return groups, nil
}

// Split splits every event of the stream with a Splitter of the groups'
// sources: one piece per event, its run from the MDF header. Errors: those
// of ForEachEvent and Splitter.Split (ErrUnknownSource for a bank of a
// source outside groups), offsets in the stream.
func (stream) Split(r io.Reader, groups []schemas.SourceGroup, emit func(format.Piece) error) error {
	var ids []uint32
	for _, g := range groups {
		ids = append(ids, g.Sources...)
	}
	sp, err := NewSplitter(ids)
	if err != nil {
		return err
	}
	var frags []schemas.Fragment
	return ForEachEvent(r, func(ev *Event) error {
		if frags, err = sp.Split(frags[:0], &ev.Header, ev.Body, ev.Index); err != nil {
			return schemas.WithOffset(err, ev.Offset+int64(ev.Header.Len()))
		}
		return emit(format.Piece{Run: ev.Header.Run, Fragments: frags})
	})
}
