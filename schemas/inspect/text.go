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
// lines, then one line per event of detail.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	line := func(k, f string, a ...any) { fmt.Fprintf(tw, "%s:\t%s\n", k, fmt.Sprintf(f, a...)) }
	line("format", "%s", r.Format)
	line("bytes", "%d in %d records", r.Bytes, r.Records)
	line("events", "%d", r.Events)
	if len(r.Sources) > 0 {
		line("sources", "%d: %s", r.NumSources, r.sourceList(r.Sources))
	} else {
		line("sources", "%d", r.NumSources)
	}
	line("record sizes", "min %d, median %d, max %d bytes", r.RecordBytes.Min, r.RecordBytes.Median, r.RecordBytes.Max)
	c := r.Checksums
	s := fmt.Sprintf("%d valid, %d bad", c.Valid, c.Bad)
	if c.Absent > 0 {
		s += fmt.Sprintf(", %d absent", c.Absent)
	}
	line("checksums", "%s (%s)", s, c.What)
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
	case r.VDIF != nil:
		r.vdifText(line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return r.detailText(w)
}

type lineFunc func(k, f string, a ...any)

func (r *Report) cmsText(line lineFunc) {
	c := r.CMS
	if h := c.FileHeader; h != nil {
		line("file header", "RAW_%04d: %d events, run %d, lumi %d, %d bytes, data type %d", h.Version, h.EventCount, h.Run, h.Lumi, h.FileSize, h.DataType)
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
	line("ROB fragments", "%d, %d fragments with status bits set", a.ROBs, a.StatusSet)
	line("checksum types", "%s", countMap(a.ChecksumTypes))
	if r.Format == ATLASFullEvent {
		line("runs", "%s", schemas.FormatSourceList(a.Runs))
		line("global ids", "%d .. %d", a.GlobalIDRange[0], a.GlobalIDRange[1])
	}
}

func (r *Report) lhcbText(line lineFunc) {
	l := r.LHCb
	line("raw banks", "%d; by type %s", l.Banks, countMap(l.BanksByType))
	line("source ids", "%d distinct", l.SourceIDs)
	line("MDF header versions", "%s", countMap(l.HeaderVersions))
	line("compressed records", "%d", l.Compressed)
	line("runs", "%s", schemas.FormatSourceList(l.Runs))
	line("ODIN event numbers", "%d .. %d", l.EventNumbers[0], l.EventNumbers[1])
	if len(l.PackingFactors) > 0 {
		line("packing factors", "%v", l.PackingFactors)
	}
}

func (r *Report) vdifText(line lineFunc) {
	v := r.VDIF
	line("frame sizes", "%s", countMap(v.FrameSizes))
	if r.Format == VDIF {
		line("stations", "%s", strings.Join(v.Stations, ", "))
		line("EDVs", "%v (legacy frames: %d)", v.EDVs, v.LegacyFrames)
		line("invalid frames", "%d", v.InvalidFrames)
		line("frames/s per thread", "%d (from %s)", v.FramesPerSecond, v.FrameRateFrom)
		if v.ThreadCheck != "" {
			line("thread check", "%s", v.ThreadCheck)
		} else {
			line("thread check", "threads agree")
		}
	} else {
		line("time codes", "%s .. %s", v.StartTimeCode, v.EndTimeCode)
		line("user fields", "%#x", v.UserFields)
		line("TVG frames", "%d", v.TVGFrames)
	}
}

// detailText writes the per-event table.
func (r *Report) detailText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	switch {
	case len(r.Detail) > 0:
		fmt.Fprintln(tw, "\n#\toffset\tbytes\tevent id\trun\tchecksum\tsources\tnote")
		for _, d := range r.Detail {
			ok := "ok"
			if !d.ChecksumOK {
				ok = "BAD"
			}
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", d.Index, d.Offset, d.Bytes, d.EventID, d.Run, ok, r.sourceList(d.Sources), d.Note)
		}
	case r.LHCb != nil && len(r.LHCb.Detail) > 0:
		fmt.Fprintln(tw, "\n#\toffset\tbytes\tevent number\trun\torbit\tbunch\tbanks\tODIN")
		for _, d := range r.LHCb.Detail {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%v\n", d.Index, d.Offset, d.Bytes, d.EventNumber, d.Run, d.Orbit, d.Bunch, d.Banks, d.HasODIN)
		}
	case r.VDIF != nil && len(r.VDIF.Details) > 0:
		fmt.Fprintln(tw, "\noffset\tbytes\tthread\tstation\tseconds\tframe\ttime\tflags")
		for _, d := range r.VDIF.Details {
			t := d.TimeCode
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
			if d.TVG {
				flags = append(flags, "tvg")
			}
			fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%d\t%d\t%s\t%s\n", d.Offset, d.Bytes, d.Thread, d.Station, d.Seconds, d.FrameNumber, t, strings.Join(flags, ","))
		}
	}
	return tw.Flush()
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
