package inspect

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-daq/sluice/schemas"
)

// WriteText writes the report for people: the summary, the format's own
// lines, then one line per row of detail, each column named for what it
// holds.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	line := func(k, f string, a ...any) { fmt.Fprintf(tw, "%s:\t%s\n", k, fmt.Sprintf(f, a...)) }
	line("format", "%s", r.Format)
	line("bytes", "%d in %s", r.Bytes, plural(r.Records, r.recordUnit()))
	line("events", "%d", r.Events)
	switch {
	case r.LHCb != nil:
		line("sources", "%d readout sources (bank type, source id); %d distinct source ids", r.NumSources, r.LHCb.SourceIDs)
	case len(r.Sources) > 0:
		line("sources", "%d: %s", r.NumSources, r.sourceList(r.Sources))
	default:
		line("sources", "%d", r.NumSources)
	}
	if r.Table == nil {
		line("record sizes", "min %d, median %d, max %d bytes", r.RecordBytes.Min, r.RecordBytes.Median, r.RecordBytes.Max)
	}
	c := r.Checksums
	if c.Valid+c.Bad+c.Absent == 0 {
		line("checksums", "%s", c.What)
	} else {
		s := fmt.Sprintf("%d valid, %d bad", c.Valid, c.Bad)
		if c.Absent > 0 {
			s += fmt.Sprintf(", %d absent", c.Absent)
		}
		line("checksums", "%s (%s)", s, c.What)
	}
	if r.Start != nil && r.End != nil {
		line("time range", "%s .. %s (%s)", r.Start.Format(time.RFC3339Nano), r.End.Format(time.RFC3339Nano), r.End.Sub(*r.Start))
	}
	switch {
	case r.CMS != nil:
		r.cmsText(line)
	case r.ATLAS != nil:
		r.atlasText(line)
	case r.LHCb != nil:
		r.lhcbText(line)
	case r.Baseband != nil:
		r.basebandText(line)
	case r.Table != nil:
		r.tableText(line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return r.detailText(w)
}

// recordUnit names what Records counts, in the singular.
func (r *Report) recordUnit() string {
	switch r.Format {
	case VDIF, Mark5B:
		return "frame"
	case ArrowIPC:
		return "record batch"
	case Parquet:
		return "row group"
	}
	return "record"
}

type lineFunc func(k, f string, a ...any)

func (r *Report) cmsText(line lineFunc) {
	c := r.CMS
	if h := c.FileHeader; h != nil {
		line("file header", "RAW_%04d: %s, run %d, lumi %d, %d bytes, data type %d", h.Version, plural(int(h.EventCount), "event"), h.Run, h.Lumi, h.FileSize, h.DataType)
	} else {
		line("file header", "none")
	}
	line("FRD versions", "%s", countMap(c.Versions))
	line("runs", "%s", schemas.FormatSourceList(c.Runs))
	line("lumi sections", "%s", schemas.FormatSourceList(c.Lumis))
	line("event numbers", "%d .. %d", c.EventRange[0], c.EventRange[1])
	line("FED fragments", "%d, %d with a bad CRC-16, %d with R/F error bits", c.FEDs, c.FEDCRCBad, c.FEDErrorBits)
}

func (r *Report) atlasText(line lineFunc) {
	a := r.ATLAS
	line("byte order", "%s", a.ByteOrder)
	line("ROB fragments", "%d, %d with status bits set", a.ROBs, a.StatusSet)
	line("checksum types", "%s", countMap(a.ChecksumTypes))
	if r.Format == ATLASFullEvent {
		line("runs", "%s", schemas.FormatSourceList(a.Runs))
		line("global ids", "%d .. %d", a.GlobalIDRange[0], a.GlobalIDRange[1])
	}
}

func (r *Report) lhcbText(line lineFunc) {
	l := r.LHCb
	line("raw banks", "%d; by type %s", l.Banks, countMap(l.BanksByType))
	line("MDF header versions", "%s", countMap(l.HeaderVersions))
	line("compressed records", "%d", l.Compressed)
	line("runs", "%s", schemas.FormatSourceList(l.Runs))
	line("ODIN event numbers", "%d .. %d", l.EventNumbers[0], l.EventNumbers[1])
	if len(l.PackingFactors) > 0 {
		line("packing factors", "%v", l.PackingFactors)
	}
}

func (r *Report) basebandText(line lineFunc) {
	v := r.Baseband
	line("frame sizes", "%s", countMap(v.FrameSizes))
	if r.Format != VDIF {
		line("time codes", "%s .. %s", v.StartTimeCode, v.EndTimeCode)
		line("user fields", "%#x", v.UserFields)
		line("TVG frames", "%d", v.TVGFrames)
		return
	}
	line("stations", "%s", strings.Join(v.Stations, ", "))
	line("EDVs", "%v (legacy frames: %d)", v.EDVs, v.LegacyFrames)
	line("invalid frames", "%d", v.InvalidFrames)
	switch v.FrameRateSource {
	case "header":
		line("frames/s per thread", "%d (from the sample rate in the headers)", v.FramesPerSecond)
	case "stream":
		line("frames/s per thread", "%d (counted over a whole second of frames)", v.FramesPerSecond)
	default:
		line("frames/s per thread", "unknown (≥ %d frames/s from %s in %d s); time range from frame numbers not shown",
			v.FramesPerSecond, plural(v.Frames, "frame"), v.SecondsSpanned)
	}
	if v.ThreadCheck != "" {
		line("thread check", "%s", v.ThreadCheck)
	} else {
		line("thread check", "threads agree")
	}
}

// detailText writes the per-row table.
func (r *Report) detailText(w io.Writer) error {
	d := r.Detail
	if d == nil {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(cells ...any) {
		for i, c := range cells {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, c)
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintln(tw)
	switch {
	case r.Format == NativeFragment || r.Format == NativeMFP:
		row("#", "kind", "offset", "record bytes", "source", "(first) event id", "n", "CRC-32C", "note")
		for _, e := range d.Events {
			row(e.Index, e.Kind, e.Offset, e.Bytes, r.sourceList(e.Sources), e.EventID, e.N, okText(e.ChecksumOK), e.Note)
		}
	case d.Events != nil:
		row("#", "kind", "offset", "record bytes", "event id", "run", "checksum", "sources", "note")
		for _, e := range d.Events {
			row(e.Index, e.Kind, e.Offset, e.Bytes, e.EventID, e.Run, okText(e.ChecksumOK), r.sourceList(e.Sources), e.Note)
		}
	case d.LHCb != nil && r.Format == LHCbMEP:
		row("#", "MEP offset", "MEP bytes", "event in MEP", "bank bytes (rebuilt)", "event number", "run", "orbit", "bunch", "banks", "ODIN")
		for _, e := range d.LHCb {
			row(e.Index, e.Offset, e.RecordBytes, e.InRecord, e.BankBytes, e.EventNumber, e.Run, e.Orbit, e.Bunch, e.Banks, e.HasODIN)
		}
	case d.LHCb != nil:
		row("#", "offset", "record bytes", "bank bytes", "event number", "run", "orbit", "bunch", "banks", "ODIN")
		for _, e := range d.LHCb {
			row(e.Index, e.Offset, e.RecordBytes, e.BankBytes, e.EventNumber, e.Run, e.Orbit, e.Bunch, e.Banks, e.HasODIN)
		}
	case d.Frames != nil:
		r.framesText(row)
	case d.Rows != nil:
		r.rowsText(row)
	}
	return tw.Flush()
}

// framesText writes the VDIF or Mark 5B frame table. A VDIF frame's time
// is its UTC start, shown only when the frame rate is known.
func (r *Report) framesText(row func(...any)) {
	if r.Format == Mark5B {
		row("#", "offset", "frame bytes", "second of day", "frame", "time code", "user", "flags")
		for _, d := range r.Detail.Frames {
			flags := ""
			if d.TVG {
				flags = "tvg"
			}
			row(d.Index, d.Offset, d.Bytes, d.Seconds, d.FrameNumber, d.TimeCode, fmt.Sprintf("%#x", d.User), flags)
		}
		return
	}
	row("#", "offset", "frame bytes", "thread", "station", "epoch second", "frame", "time", "flags")
	for _, d := range r.Detail.Frames {
		t := "-" // the frame rate is not known
		if d.Time != nil {
			t = d.Time.Format(time.RFC3339Nano)
		}
		var flags []string
		if d.Legacy {
			flags = append(flags, "legacy")
		}
		if d.Invalid {
			flags = append(flags, "invalid")
		}
		row(d.Index, d.Offset, d.Bytes, d.Thread, d.Station, d.Seconds, d.FrameNumber, t, strings.Join(flags, ","))
	}
}

// dash stands for an empty cell, so that the columns stay readable.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func okText(ok bool) string {
	if ok {
		return "ok"
	}
	return "BAD"
}

// plural writes n and the noun, in the plural unless n is 1 ("batch"
// takes "es").
func plural(n int, noun string) string {
	switch {
	case n == 1:
		return "1 " + noun
	case strings.HasSuffix(noun, "ch"):
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func (r *Report) tableText(line lineFunc) {
	t := r.Table
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
		line("source group "+g.Name, "%s: %s", plural(g.NumSources, "source"), g.Sources)
	}
	line("runs", "%s", schemas.FormatSourceList(t.Runs))
	line("event ids", "%d .. %d", t.EventIDRange[0], t.EventIDRange[1])
	line("payload bytes per event", "min %d, median %d, max %d", t.PayloadBytes.Min, t.PayloadBytes.Median, t.PayloadBytes.Max)
	if len(t.Status) > 0 {
		line("status", "%s", countMap(t.Status))
	}
	if len(t.Decisions) > 0 {
		line("decisions", "%s", countMap(t.Decisions))
	}
}

// rowsText writes the table rows: events of an event table, else only
// their index.
func (r *Report) rowsText(row func(...any)) {
	if !r.Table.EventTable {
		row("#")
		for _, d := range r.Detail.Rows {
			row(d.Index)
		}
		return
	}
	row("#", "event id", "run", "time", "fragments", "payload bytes", "status", "missing", "corrupt", "decision")
	for _, d := range r.Detail.Rows {
		t := "-"
		if d.Time != nil {
			t = d.Time.Format(time.RFC3339Nano)
		}
		row(d.Index, d.EventID, d.Run, t, d.Fragments, d.PayloadBytes, dash(strings.Join(d.Status, ",")),
			dash(schemas.FormatSourceList(d.MissingSources)), dash(schemas.FormatSourceList(d.CorruptSources)), dash(d.Decision))
	}
}

// sourceList renders source ids: ATLAS source ids in hex (sub-detector in
// the high byte, module below, as ATLAS writes them), others as ranges.
func (r *Report) sourceList(ids []uint32) string {
	if r.ATLAS == nil {
		return schemas.FormatSourceList(ids)
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%#x", id)
	}
	return strings.Join(parts, ",")
}

// countMap renders a count map as "k1: n1, k2: n2" in key order.
func countMap[K interface{ ~int | ~uint8 | ~string }](m map[K]int) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%v: %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
