package besiii

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
	"github.com/sluice-daq/sluice/schemas/internal/summary"
)

// Format is the BESIII raw file, as registered in schemas/formats:
// detect, inspect, split, join (one data separator and event per built
// event) and export (a whole file, "besiii").
var Format format.Format = rawFormat{}

type rawFormat struct{}

var (
	_ format.Splitter = rawFormat{}
	_ format.Joiner   = rawFormat{}
	_ format.Exporter = rawFormat{}
)

func (rawFormat) Name() string { return fmtFile }
func (rawFormat) Sign() string {
	return "a BESIII raw file record (FILE_START 0x1234aaaa, or a data separator 0x1234cccc before an eformat v3.0 event), or a bare eformat v3.0 full event"
}

// ExportName is "besiii".
func (rawFormat) ExportName() string { return "besiii" }

// NewJoiner returns a Joiner.
func (rawFormat) NewJoiner() format.EventJoiner { return Joiner{} }

// Detect is Certain for a FILE_START record followed by FILE_NAME, for a
// data separator followed by an eformat v3.0 full event, and for an
// eformat v3.0 full event itself (a bare stream: atlas reads 4.0).
func (rawFormat) Detect(head []byte) format.Match {
	if len(head) < 36 {
		return format.NoMatch
	}
	w := func(i int) uint32 { return binary.LittleEndian.Uint32(head[4*i:]) }
	switch {
	case w(0) == MarkerFileStart && w(1) == fileStartWords && w(8) == MarkerFileName:
		return format.Certain
	case w(0) == MarkerSeparator && w(1) == separatorWords && w(4) == MarkerFullEvent && w(7)>>16 == Version>>16:
		return format.Certain
	case w(0) == MarkerFullEvent && w(3)>>16 == Version>>16:
		return format.Certain
	}
	return format.NoMatch
}

// Report is what only BESIII raw files have: the section "besiii" of
// their inspect report.
type Report struct {
	EformatVersion string    `json:"eformat_version"` // "3.0"
	File           *Head     `json:"file,omitempty"`  // the start records; nil when the stream has none
	SubDetectors   int       `json:"sub_detectors"`
	ROS            int       `json:"ros"`
	ROBs           int       `json:"robs"` // = ROD fragments
	StatusSet      int       `json:"status_set"`
	Runs           []uint32  `json:"runs,omitempty"`
	GlobalIDRange  [2]uint32 `json:"global_id_range"`
	BlockRange     [2]uint32 `json:"data_block_range"`
	Bare           int       `json:"bare_events,omitempty"` // events without a data separator (a bare v3.0 stream)

	events   int      // events read
	blockSet bool     // BlockRange holds a separator's block number
	End      *FileEnd `json:"file_end,omitempty"` // nil when the stream has none
}

// Key is the section's JSON key.
func (*Report) Key() string { return "besiii" }

// dateTime writes BESIII's decimal date (DMMYYYY) and time (HHMMSS).
func dateTime(d, t uint32) string {
	return fmt.Sprintf("%04d-%02d-%02d %02d:%02d:%02d", d%10000, d/10000%100, d/1000000, t/10000, t/100%100, t%100)
}

// Lines writes the section's text lines.
func (b *Report) Lines(line format.LineFunc) {
	line("eformat version", "%s (full event > sub-detector > ROS > ROB > ROD)", b.EformatVersion)
	if h := b.File; h != nil {
		line("file", "number %d, version %d, written %s by %q, tag %q", h.FileNumber, h.FileVersion, dateTime(h.Date, h.Time), h.AppName, h.UserTag)
		line("run parameters", "run %d, max events %d, rec enable %d, trigger type %d, detector mask %#x, beam type %d, beam energy %d",
			h.Run, h.MaxEvents, h.RecEnable, h.TriggerType, h.DetectorMask, h.BeamType, h.BeamEnergy)
	} else {
		line("file", "no start records (the stream starts at a data separator or is bare eformat v3.0 events)")
	}
	line("fragments", "%d sub-detector, %d ROS, %d ROB (%d with status bits set)", b.SubDetectors, b.ROS, b.ROBs, b.StatusSet)
	line("runs", "%s", schemas.FormatSourceList(b.Runs))
	line("global ids", "%d .. %d", b.GlobalIDRange[0], b.GlobalIDRange[1])
	if b.Bare < b.events {
		line("data blocks", "%d .. %d", b.BlockRange[0], b.BlockRange[1])
	}
	if b.Bare > 0 {
		line("bare events", "%d (no data separator)", b.Bare)
	}
	if e := b.End; e != nil {
		line("file end", "written %s: %d events in file, %d MB; %d events in run, %d MB; status %d", dateTime(e.Date, e.Time), e.EventsInFile, e.DataInFileMB, e.EventsInRun, e.DataInRunMB, e.Status)
	} else {
		line("file end", "none")
	}
}

func hexSources(ids []uint32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%#x", id)
	}
	return strings.Join(parts, ",")
}

// Inspect reads the file's records and events, checking every fragment's
// structure. A FILE_END record whose event count is not the count read is
// an error (ErrInconsistent) after the report.
func (rawFormat) Inspect(s *format.Stream, maxEvents int) (*format.Report, error) {
	b := &Report{EformatVersion: "3.0"}
	rep := &format.Report{Format: fmtFile, Section: b, Checksums: format.Checksums{What: "none (eformat v3.0 has no checksums)"}}
	rows := summary.Records{Max: maxEvents}
	sources, runs := map[uint32]bool{}, map[uint32]bool{}
	var (
		sizes      []int
		start, end time.Time
	)
	rd := newReader(s.Reader)
	err := rd.readHead()
	b.File = rd.head
	for err == nil {
		var it item
		if it, err = rd.next(); err != nil {
			break
		}
		var e Fragment
		if e, _, err = DecodeEvent(it.Bytes); err != nil {
			err = schemas.WithOffset(err, it.Off)
			break
		}
		sep := 4 * separatorWords
		if it.Bare {
			sep = 0
			b.Bare++
		}
		d := summary.Record{Kind: "event", Index: rep.Events, Offset: it.Off - int64(sep), Bytes: len(it.Bytes) + sep,
			EventID: uint64(e.GlobalID()), Run: e.Run(), ChecksumOK: true, ChecksumAbsent: true}
		nros, nrob := 0, 0
		for i := range e.Children {
			nros += len(e.Children[i].Children)
		}
		e.ROBs(func(r *Fragment) bool {
			nrob++
			sources[r.SourceID] = true
			d.Sources = append(d.Sources, r.SourceID)
			if len(r.Status) > 0 && r.Status[0]&0xFFFF != 0 {
				b.StatusSet++
			}
			return true
		})
		where := fmt.Sprintf("block %d", it.Block)
		if it.Bare {
			where = "bare"
		}
		d.Note = fmt.Sprintf("%s, lvl1_id %#x, trigger type %d, %d sub-detectors, %d ROS, %d ROBs", where, e.L1ID(), e.L1TriggerType(), len(e.Children), nros, nrob)
		b.SubDetectors += len(e.Children)
		b.ROS += nros
		b.ROBs += nrob
		runs[e.Run()] = true
		t := time.Unix(int64(e.Time()), 0).UTC()
		if rep.Events == 0 {
			start, end = t, t
			b.GlobalIDRange = [2]uint32{e.GlobalID(), e.GlobalID()}
		}
		start, end = minTime(start, t), maxTime(end, t)
		b.GlobalIDRange = [2]uint32{min(b.GlobalIDRange[0], e.GlobalID()), max(b.GlobalIDRange[1], e.GlobalID())}
		switch {
		case it.Bare:
		case !b.blockSet:
			b.BlockRange, b.blockSet = [2]uint32{it.Block, it.Block}, true
		default:
			b.BlockRange = [2]uint32{min(b.BlockRange[0], it.Block), max(b.BlockRange[1], it.Block)}
		}
		b.events++
		rep.Records++
		rep.Events++
		rep.Checksums.Absent++
		rep.Bytes += int64(d.Bytes)
		sizes = append(sizes, d.Bytes)
		rows.Add(d)
	}
	if err == io.EOF {
		err = nil
	}
	b.End = rd.end
	if err == nil && b.End != nil && int(b.End.EventsInFile) != rep.Events {
		err = schemas.Errorf(fmtFile, "FILE_END events_in_file", rd.off-4*fileEndWords+16, schemas.ErrInconsistent, "the file end says %d events, the file holds %d", b.End.EventsInFile, rep.Events)
	}
	if rep.Events > 0 {
		rep.Start, rep.End = &start, &end
	}
	rep.Sources = summary.SortedKeys(sources)
	rep.NumSources = len(rep.Sources)
	if rep.NumSources > 0 {
		rep.SourcesText = fmt.Sprintf("%d ROBs: %s", rep.NumSources, hexSources(rep.Sources))
	}
	b.Runs = summary.SortedKeys(runs)
	rep.RecordBytes = summary.SizeStatsOf(sizes)
	rep.Detail = rows.Detail(summary.EventTable(hexSources))
	return rep, err
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// each decodes the events of the stream r in turn and calls fn with each,
// the file's start records (nil when none) and its data block number.
// Errors: the decoders' (offsets in the stream) and fn's.
func each(r io.Reader, fn func(e *Fragment, head *Head, block uint32, off int64) error) error {
	rd := newReader(r)
	if err := rd.readHead(); err != nil {
		return err
	}
	for {
		it, err := rd.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		e, _, err := DecodeEvent(it.Bytes)
		if err != nil {
			return schemas.WithOffset(err, it.Off)
		}
		if err := fn(&e, rd.head, it.Block, it.Off); err != nil {
			return err
		}
	}
}

// Sources reads every event and groups the ROB source ids by sub-detector
// (bits 23:16 of the source id), ascending: group "subdet<xx>" (two hex
// digits) per sub-detector, then group "header" with HeaderSource.
func (rawFormat) Sources(r io.Reader) ([]schemas.SourceGroup, error) {
	seen := map[uint32]bool{}
	err := each(r, func(e *Fragment, _ *Head, _ uint32, _ int64) error {
		e.ROBs(func(r *Fragment) bool {
			seen[r.SourceID] = true
			return true
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return summary.SubdetectorGroups(seen, HeaderSource), nil
}

// Split splits every event (SplitEvent): one piece per event, its run the
// event's run number. Errors: the decoders' (offsets in the stream) and
// SplitEvent's.
func (rawFormat) Split(r io.Reader, _ []schemas.SourceGroup, emit func(format.Piece) error) error {
	var frags []schemas.Fragment
	return each(r, func(e *Fragment, head *Head, block uint32, off int64) error {
		var err error
		if frags, err = SplitEvent(frags[:0], e, head, block); err != nil {
			return fmt.Errorf("besiii: event at byte %d: %w", off, err)
		}
		return emit(format.Piece{Run: e.Run(), Fragments: frags})
	})
}

// NewWriter returns a writer of a BESIII raw file onto w: the file start
// records of the first event's file (none when it had none), then every
// event's data separator and full event (Joiner), and at Close a FILE_END
// record counting them (date and time those of the FILE_START record, the
// sizes in whole MB, status 0), written only when the start records were.
// Rows of the export schema are read with schemas.NewEventBatch; schema
// and mem are not needed.
func (rawFormat) NewWriter(w io.Writer, _ *arrow.Schema, _ memory.Allocator) (format.Writer, error) {
	return &fileWriter{w: w}, nil
}

type fileWriter struct {
	w      io.Writer
	buf    []byte
	head   *Head
	seen   bool // an event was written
	events int
	bytes  int64
}

// Write writes every row of rec. A row that does not join stops the
// writing with an error naming its run and event.
func (fw *fileWriter) Write(rec arrow.RecordBatch) error {
	eb, err := schemas.NewEventBatch(rec)
	if err != nil {
		return err
	}
	for i := range eb.Len() {
		var head []uint32
		fw.buf, head, err = join(fw.buf[:0], eb, i)
		if err != nil {
			if errors.Is(err, format.ErrForeignEvents) {
				return err
			}
			return fmt.Errorf("run %d event %d: %w", eb.Run(i), eb.EventID(i), err)
		}
		if !fw.seen && len(head) > 0 {
			h, err := DecodeHead(head)
			if err != nil {
				return fmt.Errorf("run %d event %d: the file start records: %w", eb.Run(i), eb.EventID(i), err)
			}
			fw.head = &h
			if _, err := fw.w.Write(appendWords(nil, head)); err != nil {
				return err
			}
			fw.bytes += 4 * int64(len(head))
		}
		fw.seen = true
		if _, err := fw.w.Write(fw.buf); err != nil {
			return err
		}
		fw.events++
		fw.bytes += int64(len(fw.buf))
	}
	return nil
}

// Close writes the FILE_END record when the start records were written.
func (fw *fileWriter) Close() error {
	if fw.head == nil {
		return nil
	}
	mb := uint32(fw.bytes >> 20)
	_, err := fw.w.Write(appendFileEnd(nil, FileEnd{Date: fw.head.Date, Time: fw.head.Time,
		EventsInFile: uint32(fw.events), DataInFileMB: mb, EventsInRun: uint32(fw.events), DataInRunMB: mb}))
	return err
}
