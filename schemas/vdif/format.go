package vdif

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
	"github.com/sluice-daq/sluice/schemas/internal/summary"
)

// The formats, as registered in schemas/formats: VDIF frames (detect,
// inspect, split: one fragment per frame, join: export "vdif"), and Mark 5B
// frames (detect, inspect only). Both report the section "baseband".
var (
	VDIFFormat   format.Format = vdifStream{}
	Mark5BFormat format.Format = mark5bStream{}
)

type vdifStream struct{}

var (
	_ format.Splitter = vdifStream{}
	_ format.Joiner   = vdifStream{}
)

func (vdifStream) Name() string { return FormatVDIF }
func (vdifStream) Sign() string { return "VDIF headers" }

// Detect is Plausible for what DetectVDIF accepts: VDIF has no magic, and
// a header of zeros passes most of its checks.
func (vdifStream) Detect(head []byte) format.Match {
	if DetectVDIF(head) {
		return format.Plausible
	}
	return format.NoMatch
}

// Refusal is the error of the first header whose frame and the next
// agree as VDIF's do but whose EDV's extended words are wrong (so Detect
// refused the stream), e.g. `EDV 0 requires extended user data 0`; nil
// when the stream does not look like VDIF.
func (vdifStream) Refusal(head []byte) error { return refusal(head) }

func (vdifStream) Inspect(r *format.Stream, maxEvents int) (*format.Report, error) {
	return report(inspectVDIF(r.Reader, maxEvents))
}

// ExportName is "vdif".
func (vdifStream) ExportName() string { return "vdif" }

// NewJoiner returns a Joiner writing each event's frames in the batch's
// source order (Joiner.Order nil).
func (vdifStream) NewJoiner() format.EventJoiner { return &Joiner{} }

// Sources scans the stream (ScanSources) and returns one group "vdif" of
// its sources (SourceID: station and thread), ascending.
func (vdifStream) Sources(r io.Reader) ([]schemas.SourceGroup, error) {
	ids, err := ScanSources(r)
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	return []schemas.SourceGroup{{Name: "vdif", Sources: ids}}, nil
}

// Split reads every frame and hands it on as one fragment (FrameFragment:
// event id from its time, source id from station and thread, flagged
// FlagSourceError when the frame says its data are invalid). Errors: the
// Reader's, offsets in the stream.
func (vdifStream) Split(r io.Reader, _ []schemas.SourceGroup, emit func(format.Piece) error) error {
	rd := NewReader(r)
	frag := make([]schemas.Fragment, 1)
	for {
		f, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		frag[0] = FrameFragment(&f)
		if err := emit(format.Piece{Fragments: frag}); err != nil {
			return err
		}
	}
}

var _ format.Framer = vdifStream{}

// Framing is "vdif": a VTP datagram carries one VDIF frame.
func (vdifStream) Framing() string { return "vdif" }

// Frames hands on every frame as it lies in data, with its source and
// event id (SourceID, EventID). Errors: the Reader's, offsets in data.
func (vdifStream) Frames(data []byte, emit func(format.Frame) error) error {
	rd := NewReader(bytes.NewReader(data))
	for {
		f, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := emit(format.Frame{Bytes: f.Bytes, Source: SourceID(&f.Header), Event: EventID(&f.Header), Fragments: 1}); err != nil {
			return err
		}
	}
}

type mark5bStream struct{}

func (mark5bStream) Name() string { return FormatMark5B }
func (mark5bStream) Sign() string { return "a Mark 5B sync word" }

// Detect is Certain for what DetectMark5B accepts: a sync word and a
// time code whose CRC-16 matches.
func (mark5bStream) Detect(head []byte) format.Match {
	if DetectMark5B(head) {
		return format.Certain
	}
	return format.NoMatch
}

func (mark5bStream) Inspect(r *format.Stream, maxEvents int) (*format.Report, error) {
	return report(inspectMark5B(r.Reader, maxEvents))
}

// report fills the common fields from a VDIF or Mark 5B report (sources
// are the thread ids; frames are both records and events) and keeps it as
// the section, its frame details moved to the report's detail.
func report(v *Report, err error) (*format.Report, error) {
	if v == nil {
		return nil, err
	}
	rep := &format.Report{Format: v.Format, Bytes: v.Bytes, Records: v.Frames, Events: v.Frames, Start: v.Start, End: v.End,
		RecordUnit: "frame", Section: v}
	if v.Format == FormatVDIF {
		// The node builds a VDIF event per (second, frame number), from
		// one frame of each thread: that is the events' count.
		rep.Events = v.Events
		rep.EventsText = fmt.Sprintf("%d ((second, frame) events across %s; %s)", v.Events, format.Plural(len(v.Threads), "thread"), format.Plural(v.Frames, "frame"))
	}
	if len(v.Details) > 0 {
		rows, mark5b := v.Details, v.Format == FormatMark5B
		rep.Detail = &format.Detail{Of: "frames", Rows: rows, Table: func(row func(...any)) { framesTable(rows, mark5b, row) }}
		v.Details = nil
	}
	for _, t := range v.Threads {
		rep.Sources = append(rep.Sources, uint32(t))
	}
	rep.NumSources = len(rep.Sources)
	if v.Format == FormatMark5B {
		rep.NumSources = 1 // one recorder stream
		rep.Checksums = format.Checksums{What: "Mark 5B time-code CRC16", Valid: v.CRCValid, Bad: v.Frames - v.CRCValid}
	} else {
		rep.Checksums = format.Checksums{What: "VDIF frames carry no checksum", Absent: v.Frames}
	}
	// Frame sizes come as a histogram; take min, median and max from it.
	sizes := make([]int, 0, len(v.FrameSizes))
	for s := range v.FrameSizes {
		sizes = append(sizes, s)
	}
	slices.Sort(sizes)
	if len(sizes) > 0 {
		rep.RecordBytes.Min, rep.RecordBytes.Max = sizes[0], sizes[len(sizes)-1]
		seen := 0
		for _, s := range sizes {
			seen += v.FrameSizes[s]
			if 2*seen > v.Frames {
				rep.RecordBytes.Median = s
				break
			}
		}
	}
	return rep, err
}

// Key is the section's JSON key, shared by VDIF and Mark 5B.
func (*Report) Key() string { return "baseband" }

// Lines writes the section's text lines.
func (v *Report) Lines(line format.LineFunc) {
	line("frame sizes", "%s", summary.CountMap(v.FrameSizes))
	if v.Format != FormatVDIF {
		line("time codes", "%s .. %s", v.StartTimeCode, v.EndTimeCode)
		line("user fields", "%#x", v.UserFields)
		line("TVG frames", "%d", v.TVGFrames)
		return
	}
	line("stations", "%s", strings.Join(v.Stations, ", "))
	if s := v.Signal; s != nil {
		kind := "real"
		if s.Complex {
			kind = "complex"
		}
		mixed := ""
		if s.Mixed {
			mixed = " (of the first frame; not every frame agrees)"
		}
		line("signal", "%s × %d-bit %s samples, %d samples per frame%s", format.Plural(s.Channels, "channel"), s.BitsPerSample, kind, s.SamplesPerFrame, mixed)
		if s.SampleRateHz > 0 {
			line("sample rate", "%s per channel", sampleRate(s.SampleRateHz))
		} else {
			line("sample rate", "unknown (the frame rate is a lower bound)")
		}
		line("VDIF version", "%d, reference epoch %d (%s)", s.VDIFVersion, s.RefEpoch, s.RefEpochStart)
	}
	line("EDVs", "%v (legacy frames: %d)", v.EDVs, v.LegacyFrames)
	line("invalid frames", "%d", v.InvalidFrames)
	switch v.FrameRateSource {
	case "header":
		line("frames/s per thread", "%d (from the sample rate in the headers)", v.FramesPerSecond)
	case "stream":
		line("frames/s per thread", "%d (counted over a whole second of frames)", v.FramesPerSecond)
	default:
		line("frames/s per thread", "unknown (≥ %d frames/s from %s in %d s); time range from frame numbers not shown",
			v.FramesPerSecond, format.Plural(v.Frames, "frame"), v.SecondsSpanned)
	}
	if v.ThreadCheck != "" {
		line("thread check", "%s", v.ThreadCheck)
	} else {
		line("thread check", "threads agree")
	}
}

// sampleRate writes a rate in samples/s with an SI prefix, e.g. "32 MS/s".
func sampleRate(hz float64) string {
	for _, u := range []struct {
		f float64
		p string
	}{{1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if hz >= u.f {
			return strconv.FormatFloat(hz/u.f, 'f', -1, 64) + " " + u.p + "S/s"
		}
	}
	return strconv.FormatFloat(hz, 'f', -1, 64) + " S/s"
}

// framesTable writes the VDIF or Mark 5B frame rows as text. A VDIF
// frame's time is its UTC start, shown only when the frame rate is known.
func framesTable(rows []FrameDetail, mark5b bool, row func(cells ...any)) {
	if mark5b {
		row("#", "offset", "frame bytes", "second of day", "frame", "time code", "user", "flags")
		for _, d := range rows {
			flags := ""
			if d.TVG {
				flags = "tvg"
			}
			row(d.Index, d.Offset, d.Bytes, d.Seconds, d.FrameNumber, d.TimeCode, fmt.Sprintf("%#x", d.User), flags)
		}
		return
	}
	row("#", "offset", "frame bytes", "thread", "station", "epoch second", "frame", "time", "flags")
	for _, d := range rows {
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
