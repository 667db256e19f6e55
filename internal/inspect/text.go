package inspect

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
)

// WriteText writes the report for people: the summary every format has,
// the format's own lines, then one line per row of detail, each column
// named for what it holds.
func WriteText(w io.Writer, r *format.Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	line := func(k, f string, a ...any) { fmt.Fprintf(tw, "%s:\t%s\n", k, fmt.Sprintf(f, a...)) }
	line("format", "%s", r.Format)
	unit := r.RecordUnit
	if unit == "" {
		unit = "record"
	}
	line("bytes", "%d in %s", r.Bytes, format.Plural(r.Records, unit))
	if r.EventsText != "" {
		line("events", "%s", r.EventsText)
	} else {
		line("events", "%d", r.Events)
	}
	switch {
	case r.SourcesText != "":
		line("sources", "%s", r.SourcesText)
	case len(r.Sources) > 0:
		line("sources", "%d: %s", r.NumSources, schemas.FormatSourceList(r.Sources))
	default:
		line("sources", "%d", r.NumSources)
	}
	if !r.NoRecordSizes {
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
	if r.Section != nil {
		r.Section.Lines(line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Detail == nil || r.Detail.Table == nil {
		return nil
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw)
	r.Detail.Table(func(cells ...any) {
		for i, c := range cells {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, c)
		}
		fmt.Fprintln(tw)
	})
	return tw.Flush()
}
