package cms

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
	"github.com/sluice-daq/sluice/schemas/internal/summary"
)

// FRDFormat is the CMS FRD format as registered in schemas/formats: FRD events
// back to back, with or without a "RAW_" file header, their data FED
// fragments.
var FRDFormat format.Format = frdStream{}

type frdStream struct{}

func (frdStream) Name() string { return "cms-frd" }
func (frdStream) Sign() string { return `a CMS FRD file header ("RAW_") or FRD event` }

// Detect is Certain for an FRD file id "RAW_000n" (even one whose header
// the reader will refuse: Inspect then says what is wrong with it, and
// where), Plausible for a plausible FRD event (see plausibleFRD).
func (frdStream) Detect(head []byte) format.Match {
	if len(head) >= 8 && string(head[:7]) == FRDFileMagic+"000" {
		return format.Certain
	}
	if plausibleFRD(head) {
		return format.Plausible
	}
	return format.NoMatch
}

// plausibleFRD reports whether head starts with an FRD event (no file
// header): a known version and a data size that is a whole number of
// 64-bit words; when head holds the data, its checksum must match or, for
// a non-empty event, it must walk back cleanly as FED fragments; otherwise
// the data's first word must carry the FED header marker.
func plausibleFRD(head []byte) bool {
	e, hs, size, err := DecodeFRDHeader(head)
	if err != nil || size%FEDWordSize != 0 || size > MaxFRDEventSize {
		return false
	}
	if e.Version == 6 && e.Flags&^FRDFlagGenData != 0 {
		return false // undefined v6 flags: more likely another format
	}
	if end := hs + int(size); end <= len(head) {
		data := head[hs:end]
		return FRDChecksum(e.Version, data) == e.Checksum ||
			size > 0 && WalkFEDs(data, func(int, FED) bool { return true }) == nil
	}
	return len(head) >= hs+8 && head[hs+7]>>4 == FEDHeaderMarker
}

// Report is what only FRD files have: the section "cms" of their inspect
// report.
type Report struct {
	FileHeader   *FRDFileHeader `json:"file_header,omitempty"`
	Versions     map[int]int    `json:"frd_versions"` // FRD version -> events
	Runs         []uint32       `json:"runs"`
	Lumis        []uint32       `json:"lumis"`
	FEDs         int            `json:"feds"` // FED fragments in all events
	FEDCRCBad    int            `json:"fed_crc_bad"`
	FEDErrorBits int            `json:"fed_error_bits"` // FEDs with R or F set
	EventRange   [2]uint64      `json:"event_range"`    // first and last event number
}

// Key is the section's JSON key.
func (*Report) Key() string { return "cms" }

// Lines writes the section's text lines.
func (c *Report) Lines(line format.LineFunc) {
	if h := c.FileHeader; h != nil {
		line("file header", "RAW_%04d: %s, run %d, lumi %d, %d bytes, data type %d", h.Version, format.Plural(int(h.EventCount), "event"), h.Run, h.Lumi, h.FileSize, h.DataType)
	} else {
		line("file header", "none")
	}
	line("FRD versions", "%s", summary.CountMap(c.Versions))
	line("runs", "%s", schemas.FormatSourceList(c.Runs))
	line("lumi sections", "%s", schemas.FormatSourceList(c.Lumis))
	line("event numbers", "%d .. %d", c.EventRange[0], c.EventRange[1])
	line("FED fragments", "%d, %d with a bad CRC-16, %d with R/F error bits", c.FEDs, c.FEDCRCBad, c.FEDErrorBits)
}

// Inspect reads an FRD file (with or without its "RAW_" header) and
// checks every event checksum and every FED's CRC-16.
func (frdStream) Inspect(r *format.Stream, maxEvents int) (*format.Report, error) {
	c := &Report{Versions: map[int]int{}}
	rep := &format.Report{Format: FRDFormat.Name(), Checksums: format.Checksums{What: "FRD event adler32/crc32c and FED CRC-16"}, Section: c}
	fr, err := NewFileReader(r)
	if err != nil {
		return rep, err
	}
	c.FileHeader = fr.Header()
	feds, runs, lumis := map[uint32]bool{}, map[uint32]bool{}, map[uint32]bool{}
	rows := summary.Records{Max: maxEvents}
	var sizes []int
	finish := func() *format.Report {
		rep.Sources = summary.SortedKeys(feds)
		rep.NumSources = len(rep.Sources)
		c.Runs, c.Lumis = summary.SortedKeys(runs), summary.SortedKeys(lumis)
		rep.RecordBytes = summary.SizeStatsOf(sizes)
		rep.Detail = rows.Detail(summary.EventTable(schemas.FormatSourceList))
		return rep
	}
	for {
		off := fr.Offset()
		e, err := fr.Next()
		if err == io.EOF {
			break
		}
		if err != nil && !errors.Is(err, schemas.ErrCRCMismatch) {
			return finish(), err
		}
		d := summary.Record{Kind: "event", Index: rep.Events, Offset: off, Bytes: int(fr.Offset() - off), EventID: e.Event, Run: e.Run, ChecksumOK: err == nil}
		if err == nil {
			rep.Checksums.Valid++
		} else {
			rep.Checksums.Bad++
		}
		var badFEDs, errFEDs []uint16
		werr := WalkFEDs(e.Data, func(_ int, f FED) bool {
			feds[uint32(f.SourceID)] = true
			d.Sources = append(d.Sources, uint32(f.SourceID))
			c.FEDs++
			if f.CRCValid() {
				rep.Checksums.Valid++
			} else {
				rep.Checksums.Bad++
				c.FEDCRCBad++
				badFEDs = append(badFEDs, f.SourceID)
			}
			if f.WrongFEDID || f.SlinkError {
				c.FEDErrorBits++
				errFEDs = append(errFEDs, f.SourceID)
			}
			return true
		})
		if werr != nil {
			// Offsets in the FED data are relative to the data, which
			// starts after the event's header.
			return finish(), schemas.WithOffset(werr, off+int64(FRDHeaderSize(e.Version)))
		}
		slices.Reverse(d.Sources) // the walk went last to first; list them in data order
		d.Note = fmt.Sprintf("v%d lumi %d, %s", e.Version, e.Lumi, format.Plural(len(d.Sources), "FED"))
		if len(badFEDs) > 0 {
			d.Note += fmt.Sprintf(", bad CRC-16 in FEDs %v", badFEDs)
		}
		if len(errFEDs) > 0 {
			d.Note += fmt.Sprintf(", R/F error bits in FEDs %v", errFEDs)
		}
		if !d.ChecksumOK {
			d.Note += ", bad event checksum"
		}
		if rep.Events == 0 {
			c.EventRange[0] = e.Event
		}
		c.EventRange[1] = e.Event
		c.Versions[int(e.Version)]++
		runs[e.Run], lumis[e.Lumi] = true, true
		rep.Events++
		rep.Records++
		rep.Bytes += int64(d.Bytes)
		sizes = append(sizes, d.Bytes)
		rows.Add(d)
	}
	return finish(), nil
}
