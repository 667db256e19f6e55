// Package table is sluice's event tables as files, the formats `sluice
// store export` writes a batch at a time: Arrow IPC files and Parquet,
// each holding record batches of the export schema (schemas.ExportSchema)
// or of any other Arrow schema. It detects them by their magics,
// summarises them for inspect (rows, columns and, for sluice event tables,
// their events) and writes them.
package table

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
	"github.com/sluice-daq/sluice/schemas/internal/summary"
)

// The magics of the table formats: an Arrow IPC file starts with
// "ARROW1" and two bytes of padding and ends with "ARROW1"; a Parquet file
// starts and ends with "PAR1" (Arrow columnar format, "IPC File Format";
// Apache Parquet, "File Format").
const (
	arrowMagic   = "ARROW1"
	parquetMagic = "PAR1"
)

// tableBatchRows is how many Parquet rows are decoded at a time, so that
// a file is summarised in bounded memory.
const tableBatchRows = 1024

// Report is what only Arrow IPC and Parquet files have, the section
// "table" of their inspect report: the table's schema and, when it is a
// sluice event table (schemas.EventSchema, with or without the columns of
// schemas.ExportSchema), what its events are.
type Report struct {
	Rows    int64    `json:"rows"`
	Columns []Column `json:"columns"`
	// EventTable says whether the rows are sluice events; NotEvents says
	// why not when they are not.
	EventTable bool   `json:"event_table"`
	NotEvents  string `json:"not_event_table,omitempty"`
	Mode       string `json:"mode,omitempty"` // "event" or "timeslice"
	// Groups are the source groups of the schema, in column order.
	Groups       []SourceGroup  `json:"source_groups,omitempty"`
	Runs         []uint32       `json:"runs,omitempty"`
	EventIDRange [2]uint64      `json:"event_id_range"`      // smallest and largest event id (timeslice index)
	Status       map[string]int `json:"status,omitempty"`    // events with each status bit set
	Decisions    map[string]int `json:"decisions,omitempty"` // exports: events per trigger decision
	// PayloadBytes are the minimum, median and maximum of the payload
	// bytes of an event, all its source groups together.
	PayloadBytes format.SizeStats `json:"payload_bytes"`
}

// Column is one column of a table: its name and Arrow type.
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// SourceGroup is one source group of an event table: its name and
// sources (a schemas.FormatSourceList range list).
type SourceGroup struct {
	Name       string `json:"name"`
	Sources    string `json:"sources"`
	NumSources int    `json:"n_sources"`
}

// RowDetail describes one row of an event table.
type RowDetail struct {
	Index          int        `json:"index"` // row in the file, from 0
	EventID        uint64     `json:"event_id"`
	Run            uint32     `json:"run"`
	Time           *time.Time `json:"time,omitempty"` // event mode: when the first fragment arrived
	Status         []string   `json:"status,omitempty"`
	Fragments      int        `json:"n_fragments"`
	PayloadBytes   int        `json:"payload_bytes"`
	MissingSources []uint32   `json:"missing_sources,omitempty"`
	CorruptSources []uint32   `json:"corrupt_sources,omitempty"`
	Decision       string     `json:"decision,omitempty"` // exports only
}

// inspectTable summarises an Arrow IPC or Parquet file of size bytes.
// Decode errors are *schemas.DecodeError: a missing closing magic is
// ErrTruncated at the end of the file; a footer the reader refuses is
// ErrBadHeader at the footer; a batch or row group that does not decode is
// ErrBadHeader at its entry in the footer (Arrow) or its first byte
// (Parquet).
func inspect(rs *io.SectionReader, name string, maxEvents int, mem memory.Allocator) (rep *format.Report, err error) {
	size := rs.Size()
	parquet := name == parquetName
	magic, lenAt := arrowMagic, size-int64(len(arrowMagic))-4
	if parquet {
		magic, lenAt = parquetMagic, size-int64(len(parquetMagic))-4
	}
	tail := make([]byte, 4+len(magic))
	if lenAt < int64(len(magic)) {
		return nil, schemas.Errorf(name, "file", size, schemas.ErrTruncated, "%d bytes cannot hold both %q magics and a footer", size, magic)
	}
	if _, err := rs.ReadAt(tail, lenAt); err != nil {
		return nil, err
	}
	if string(tail[4:]) != magic {
		return nil, schemas.Errorf(name, "closing magic", size, schemas.ErrTruncated, "the file does not end with %q: cut short or still being written", magic)
	}
	// The footer ends with its length, then the magic.
	footerAt := lenAt - int64(binary.LittleEndian.Uint32(tail))
	tr := &Report{Status: map[string]int{}, Decisions: map[string]int{}}
	rep = &format.Report{Format: name, Bytes: size, Section: tr, NoRecordSizes: true, RecordUnit: "record batch"}
	if parquet {
		rep.RecordUnit = "row group"
	}
	t := &tableState{rep: rep, tr: tr, maxEvents: maxEvents}
	mem = boundedAllocator{Allocator: mem, limit: max(tableAllocSlack, tableAllocFactor*int(size))}
	// The Arrow and Parquet readers trust the footer's offsets and sizes
	// and may panic on a damaged file; inspect reports that instead.
	defer func() {
		if p := recover(); p != nil {
			t.finish()
			err = schemas.Errorf(name, "footer", footerAt, schemas.ErrBadHeader, "the %s reader failed on this file: %v", name, p)
		}
	}()
	if parquet {
		rep.Checksums.What = "Parquet page checksums not checked"
		err = t.readParquet(rs, footerAt, mem)
	} else {
		rep.Checksums.What = "none in an Arrow IPC file"
		err = t.readArrow(rs, footerAt, mem)
	}
	t.finish()
	return rep, err
}

// A damaged footer can claim buffers far larger than the file, which the
// readers would allocate. No buffer of a file sluice wrote is larger than
// tableAllocFactor times the file (Parquet may encode runs compactly), or
// tableAllocSlack bytes for a small file.
const (
	tableAllocFactor = 16
	tableAllocSlack  = 64 << 20
)

// boundedAllocator refuses, by panicking as the Arrow allocators do when
// memory runs out, any one allocation above limit bytes; inspectTable
// turns the panic into a DecodeError.
type boundedAllocator struct {
	memory.Allocator
	limit int
}

func (a boundedAllocator) Allocate(n int) []byte {
	a.check(n)
	return a.Allocator.Allocate(n)
}

func (a boundedAllocator) Reallocate(n int, b []byte) []byte {
	a.check(n)
	return a.Allocator.Reallocate(n, b)
}

func (a boundedAllocator) check(n int) {
	if n > a.limit {
		panic(fmt.Sprintf("a buffer of %d bytes, more than %d for this file", n, a.limit))
	}
}

// tableState accumulates the summary of a table batch by batch.
type tableState struct {
	rep       *format.Report
	tr        *Report
	maxEvents int
	rows      []RowDetail // the detail kept
	runs      map[uint32]bool
	sizes     []int
	start     time.Time
	end       time.Time
}

func (t *tableState) readArrow(rs *io.SectionReader, footerAt int64, mem memory.Allocator) error {
	fr, err := ipc.NewFileReader(rs, ipc.WithAllocator(mem))
	if err != nil {
		return schemas.Errorf(arrowName, "footer", footerAt, schemas.ErrBadHeader, "%v", err)
	}
	defer fr.Close()
	t.schema(fr.Schema())
	for i := range fr.NumRecords() {
		rec, err := fr.RecordBatchAt(i)
		if err != nil {
			return schemas.Errorf(arrowName, fmt.Sprintf("record batch %d", i), footerAt, schemas.ErrBadHeader, "listed in the footer: %v", err)
		}
		t.rep.Records++
		err = t.batch(rec)
		rec.Release()
		if err != nil {
			return schemas.Errorf(arrowName, fmt.Sprintf("record batch %d", i), footerAt, schemas.ErrInconsistent, "listed in the footer: %v", err)
		}
	}
	return nil
}

func (t *tableState) readParquet(rs *io.SectionReader, footerAt int64, mem memory.Allocator) error {
	pf, err := file.NewParquetReader(rs)
	if err != nil {
		return schemas.Errorf(parquetName, "footer", footerAt, schemas.ErrBadHeader, "%v", err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: tableBatchRows}, mem)
	if err != nil {
		return schemas.Errorf(parquetName, "footer", footerAt, schemas.ErrBadHeader, "%v", err)
	}
	s, err := fr.Schema()
	if err != nil {
		return schemas.Errorf(parquetName, "footer", footerAt, schemas.ErrBadHeader, "schema: %v", err)
	}
	t.schema(s)
	// One row group at a time, so that an error names where it is.
	for g := range pf.NumRowGroups() {
		at := pf.MetaData().RowGroup(g).FileOffset()
		field := fmt.Sprintf("row group %d", g)
		rr, err := fr.GetRecordReader(context.Background(), nil, []int{g})
		if err != nil {
			return schemas.Errorf(parquetName, field, at, schemas.ErrBadHeader, "%v", err)
		}
		t.rep.Records++
		for rr.Next() {
			if err = t.parquetBatch(s, rr.RecordBatch()); err != nil {
				rr.Release()
				return schemas.Errorf(parquetName, field, at, schemas.ErrInconsistent, "%v", err)
			}
		}
		err = rr.Err()
		rr.Release()
		if err != nil {
			return schemas.Errorf(parquetName, field, at, schemas.ErrBadHeader, "%v", err)
		}
	}
	return nil
}

// parquetBatch counts a batch of Parquet rows under the file's schema:
// the record reader's batches lack the schema metadata (event schema
// version, mode) that the stored Arrow schema restores.
func (t *tableState) parquetBatch(s *arrow.Schema, rec arrow.RecordBatch) error {
	if int(rec.NumCols()) != s.NumFields() {
		return fmt.Errorf("%d columns read, the schema has %d", rec.NumCols(), s.NumFields())
	}
	for i, c := range rec.Columns() {
		if !arrow.TypeEqual(c.DataType(), s.Field(i).Type) {
			return fmt.Errorf("column %s read as %s, the schema says %s", s.Field(i).Name, c.DataType(), s.Field(i).Type)
		}
	}
	full := array.NewRecordBatch(s, rec.Columns(), rec.NumRows())
	defer full.Release()
	return t.batch(full)
}

// schema records the columns and, for an event schema, the source groups.
func (t *tableState) schema(s *arrow.Schema) {
	tr := t.tr
	for _, f := range s.Fields() {
		tr.Columns = append(tr.Columns, Column{Name: f.Name, Type: f.Type.String()})
	}
	md := s.Metadata()
	if v, ok := md.GetValue(schemas.MetaSchemaVersion); !ok {
		tr.NotEvents = fmt.Sprintf("no %s in the schema metadata", schemas.MetaSchemaVersion)
		return
	} else if v != fmt.Sprint(schemas.EventSchemaVersion) {
		tr.NotEvents = fmt.Sprintf("event schema version %s, this sluice reads %d", v, schemas.EventSchemaVersion)
		return
	}
	groups, err := schemas.GroupsOf(s)
	if err != nil {
		tr.NotEvents = err.Error()
		return
	}
	tr.EventTable = true
	tr.Mode, _ = md.GetValue(schemas.MetaMode)
	sources := map[uint32]bool{}
	for _, g := range groups {
		tr.Groups = append(tr.Groups, SourceGroup{Name: g.Name, Sources: schemas.FormatSourceList(g.Sources), NumSources: len(g.Sources)})
		for _, s := range g.Sources {
			sources[s] = true
		}
	}
	t.rep.Sources = summary.SortedKeys(sources)
	t.rep.NumSources = len(t.rep.Sources)
	t.runs = map[uint32]bool{}
}

// batch counts the rows of rec and, in an event table, its events.
func (t *tableState) batch(rec arrow.RecordBatch) error {
	tr := t.tr
	first := tr.Rows
	tr.Rows += rec.NumRows()
	if !tr.EventTable {
		for i := range int(rec.NumRows()) {
			t.addRow(RowDetail{Index: int(first) + i})
		}
		return nil
	}
	eb, err := schemas.NewEventBatch(rec)
	if err != nil {
		return err
	}
	var decisions *array.Uint8
	if idx := rec.Schema().FieldIndices(schemas.ColDecision); len(idx) == 1 {
		decisions, _ = rec.Column(idx[0]).(*array.Uint8)
	}
	for i := range eb.Len() {
		d := RowDetail{Index: int(first) + i, EventID: eb.EventID(i), Run: eb.Run(i), Fragments: eb.NumFragments(i),
			MissingSources: eb.MissingSources(i), CorruptSources: eb.CorruptSources(i)}
		for g := range eb.Groups {
			for _, n := range eb.GroupSizes(g, i) {
				d.PayloadBytes += int(n)
			}
		}
		for _, name := range eb.Status(i).Names() {
			d.Status = append(d.Status, name)
			tr.Status[name]++
		}
		if decisions != nil {
			d.Decision = schemas.Decision(decisions.Value(i)).String()
			tr.Decisions[d.Decision]++
		}
		if ns := eb.Timestamp(i); ns != 0 && eb.Mode == schemas.ModeEvent {
			ts := time.Unix(0, int64(ns)).UTC()
			d.Time = &ts
			if t.start.IsZero() || ts.Before(t.start) {
				t.start = ts
			}
			if ts.After(t.end) {
				t.end = ts
			}
		}
		if t.rep.Events == 0 || d.EventID < tr.EventIDRange[0] {
			tr.EventIDRange[0] = d.EventID
		}
		tr.EventIDRange[1] = max(tr.EventIDRange[1], d.EventID)
		t.runs[d.Run] = true
		t.sizes = append(t.sizes, d.PayloadBytes)
		t.rep.Events++
		t.addRow(d)
	}
	return nil
}

// addRow keeps d while the detail has fewer than maxEvents rows. The
// slices it holds point into the batch, so they are copied.
func (t *tableState) addRow(d RowDetail) {
	if len(t.rows) >= t.maxEvents {
		return
	}
	d.MissingSources, d.CorruptSources = slices.Clone(d.MissingSources), slices.Clone(d.CorruptSources)
	t.rows = append(t.rows, d)
}

// finish fills what needs all the rows.
func (t *tableState) finish() {
	tr := t.tr
	tr.Runs = summary.SortedKeys(t.runs)
	tr.PayloadBytes = summary.SizeStatsOf(t.sizes)
	if !t.start.IsZero() {
		t.rep.Start, t.rep.End = &t.start, &t.end
	}
	if len(tr.Status) == 0 {
		tr.Status = nil
	}
	if len(tr.Decisions) == 0 {
		tr.Decisions = nil
	}
	if len(t.rows) > 0 {
		rows, events := t.rows, tr.EventTable
		of := "rows"
		if events {
			of = "events"
		}
		t.rep.Detail = &format.Detail{Of: of, Rows: rows, Table: func(row func(...any)) { rowsTable(rows, events, row) }}
	}
}

// Key is the section's JSON key, shared by Arrow IPC and Parquet.
func (*Report) Key() string { return "table" }

// Lines writes the section's text lines.
func (t *Report) Lines(line format.LineFunc) {
	line("rows", "%d", t.Rows)
	cols := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		cols[i] = c.Name + " " + c.Type
	}
	line("columns", "%d: %s", len(cols), strings.Join(cols, ", "))
	if !t.EventTable {
		line("event table", "no: %s", t.NotEvents)
		return
	}
	line("event table", "yes, mode %s", t.Mode)
	for _, g := range t.Groups {
		line("source group "+g.Name, "%s: %s", format.Plural(g.NumSources, "source"), g.Sources)
	}
	line("runs", "%s", schemas.FormatSourceList(t.Runs))
	line("event ids", "%d .. %d", t.EventIDRange[0], t.EventIDRange[1])
	line("payload bytes per event", "min %d, median %d, max %d", t.PayloadBytes.Min, t.PayloadBytes.Median, t.PayloadBytes.Max)
	if len(t.Status) > 0 {
		line("status", "%s", summary.CountMap(t.Status))
	}
	if len(t.Decisions) > 0 {
		line("decisions", "%s", summary.CountMap(t.Decisions))
	}
}

// rowsTable writes the table rows as text: the events of an event table,
// else only their index.
func rowsTable(rows []RowDetail, events bool, row func(cells ...any)) {
	if !events {
		row("#")
		for _, d := range rows {
			row(d.Index)
		}
		return
	}
	row("#", "event id", "run", "time", "fragments", "payload bytes", "status", "missing", "corrupt", "decision")
	for _, d := range rows {
		t := "-"
		if d.Time != nil {
			t = d.Time.Format(time.RFC3339Nano)
		}
		row(d.Index, d.EventID, d.Run, t, d.Fragments, d.PayloadBytes, summary.Dash(strings.Join(d.Status, ",")),
			summary.Dash(schemas.FormatSourceList(d.MissingSources)), summary.Dash(schemas.FormatSourceList(d.CorruptSources)), summary.Dash(d.Decision))
	}
}
