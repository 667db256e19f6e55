package atlas

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
	"github.com/sluice-daq/sluice/schemas/internal/summary"
)

// The formats, as registered in schemas/formats: a stream of eformat full
// events (detect, inspect, split, join: export "eformat"), or of bare ROB
// fragments (detect, inspect), each in whichever byte order its marker
// shows.
var (
	FullEventFormat format.Format = fullEventFormat{eformatStream{name: "atlas-full-event", marker: MarkerFullEvent, sign: "an eformat full-event marker"}}
	ROBFormat       format.Format = eformatStream{name: "atlas-rob", marker: MarkerROB, sign: "an eformat ROB marker"}
)

// eformatStream is what both streams share: detection by their marker,
// inspection.
type eformatStream struct {
	name, sign string
	marker     uint32
}

func (s eformatStream) Name() string { return s.name }
func (s eformatStream) Sign() string { return s.sign }

// Detect is Certain for the stream's marker in either byte order.
func (s eformatStream) Detect(head []byte) format.Match {
	if DetectOrder(head, s.marker) != nil {
		return format.Certain
	}
	return format.NoMatch
}

// Report is what only eformat files have: the section "atlas" of their
// inspect report.
type Report struct {
	ByteOrder     string         `json:"byte_order"` // "little-endian" or "big-endian" (swapped on x86)
	ROBs          int            `json:"robs"`
	ChecksumTypes map[string]int `json:"checksum_types"` // per full event and ROB
	StatusSet     int            `json:"status_set"`     // fragments with generic status bits set
	Runs          []uint32       `json:"runs,omitempty"`
	GlobalIDRange [2]uint64      `json:"global_id_range"`
	// V40Events and V50Events count the full events in eformat 4.0 and
	// 5.0 (the versions the decoder reads).
	V40Events int `json:"eformat_4_0_events,omitempty"`
	V50Events int `json:"eformat_5_0_events,omitempty"`

	fullEvents bool // a stream of full events, not of bare ROBs
}

// Key is the section's JSON key.
func (*Report) Key() string { return "atlas" }

// Lines writes the section's text lines.
func (a *Report) Lines(line format.LineFunc) {
	line("byte order", "%s", a.ByteOrder)
	line("ROB fragments", "%d, %d with status bits set", a.ROBs, a.StatusSet)
	line("checksum types", "%s", summary.CountMap(a.ChecksumTypes))
	if a.fullEvents {
		line("runs", "%s", schemas.FormatSourceList(a.Runs))
		line("global ids", "%d .. %d", a.GlobalIDRange[0], a.GlobalIDRange[1])
		if a.V50Events > 0 {
			line("eformat versions", "%s", a.versions())
		}
	}
}

// versions says how many full events are in each eformat version, the
// versions present only ("3 in 4.0, 7 in 5.0", "10 in 5.0").
func (a *Report) versions() string {
	var parts []string
	for _, v := range []struct {
		n    int
		name string
	}{{a.V40Events, "4.0"}, {a.V50Events, "5.0"}} {
		if v.n > 0 {
			parts = append(parts, fmt.Sprintf("%d in %s", v.n, v.name))
		}
	}
	return strings.Join(parts, ", ")
}

// hexSources writes source ids in hex (sub-detector in the high byte,
// module below), as ATLAS writes them.
func hexSources(ids []uint32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%#x", id)
	}
	return strings.Join(parts, ",")
}

// Inspect reads a stream of eformat full events (or of bare ROBs), each
// in whichever byte order its marker shows, and checks every checksum.
func (s eformatStream) Inspect(br *format.Stream, maxEvents int) (*format.Report, error) {
	return inspect(br.Reader, s.name, s.marker, maxEvents)
}

func inspect(br *bufio.Reader, name string, marker uint32, maxEvents int) (*format.Report, error) {
	a := &Report{ChecksumTypes: map[string]int{}, fullEvents: marker == MarkerFullEvent}
	rep := &format.Report{Format: name, Checksums: format.Checksums{What: "eformat payload checksums of full events and ROBs"}, Section: a}
	sources, runs := map[uint32]bool{}, map[uint32]bool{}
	rows := summary.Records{Max: maxEvents}
	var (
		sizes      []int
		buf        []byte
		off        int64
		err        error
		start, end time.Time
	)
	count := func(ck ChecksumType, ok bool) {
		a.ChecksumTypes[ck.String()]++
		switch {
		case ck == ChecksumNone:
			rep.Checksums.Absent++
		case ok:
			rep.Checksums.Valid++
		default:
			rep.Checksums.Bad++
		}
	}
	for {
		head, perr := br.Peek(8)
		if len(head) == 0 && perr == io.EOF {
			break
		}
		o := DetectOrder(head, marker)
		if o == nil {
			err = schemas.Errorf(name, "marker", off, schemas.ErrBadMagic, "want 0x%08x in either byte order, have % x", marker, head[:min(4, len(head))])
			break
		}
		if len(head) < 8 {
			err = schemas.Errorf(name, "fragment_size", off+4, schemas.ErrTruncated, "need 8 bytes, the file ends after %d", len(head))
			break
		}
		if rep.Records == 0 {
			a.ByteOrder = orderName(o)
		}
		// Read at least the 8 bytes peeked, so that a size word too small
		// for a header is reported as such by the decoder.
		if buf, err = summary.ReadRecord(br, buf, max(4*uint64(o.Uint32(head[4:])), 8), off, name); err != nil {
			break
		}
		d := summary.Record{Kind: "event", Index: rep.Records, Offset: off, Bytes: len(buf)}
		var robs []ROB
		none := true // no checksum in the record (yet)
		if !a.fullEvents {
			var r ROB
			r, _, _, err = DecodeROB(buf)
			robs, d.Kind = []ROB{r}, "ROB fragment"
			d.ChecksumOK = err == nil
			if rod, rerr := r.ROD(); rerr == nil {
				d.EventID, d.Run = uint64(rod.L1ID), rod.Run
			}
		} else {
			var e FullEvent
			e, _, _, err = DecodeFullEvent(buf)
			robs = e.ROBs
			if err == nil || errors.Is(err, schemas.ErrCRCMismatch) {
				count(e.ChecksumType, e.ChecksumOK)
				none = e.ChecksumType == ChecksumNone
				d.EventID, d.Run, d.ChecksumOK = uint64(e.GlobalID), e.RunNumber, err == nil
				d.Note = fmt.Sprintf("lvl1_id 0x%08x bcid %d lumi block %d, %s", e.L1ID, e.BCID, e.LumiBlock, format.Plural(len(e.ROBs), "ROB"))
				runs[e.RunNumber] = true
				t := time.Unix(int64(e.BCTimeSeconds), int64(e.BCTimeNanoseconds)).UTC()
				if rep.Events == 0 || t.Before(start) {
					start = t
				}
				if rep.Events == 0 || t.After(end) {
					end = t
				}
				if rep.Events == 0 {
					a.GlobalIDRange[0] = e.GlobalID
				}
				a.GlobalIDRange[1] = e.GlobalID
				if len(e.Status) > 0 && e.Status[0]&0xFFFF != 0 {
					a.StatusSet++
				}
				if e.v50() {
					a.V50Events++
				} else {
					a.V40Events++
				}
			}
		}
		if err != nil && !errors.Is(err, schemas.ErrCRCMismatch) {
			err = schemas.WithOffset(err, off)
			break
		}
		err = nil
		var bad []uint32
		for i := range robs {
			r := &robs[i]
			count(r.ChecksumType, r.ChecksumOK)
			none = none && r.ChecksumType == ChecksumNone
			sources[r.SourceID] = true
			d.Sources = append(d.Sources, r.SourceID)
			if !r.ChecksumOK {
				bad = append(bad, r.SourceID)
			}
			if r.GenericStatus() != 0 {
				a.StatusSet++
			}
		}
		if len(bad) > 0 {
			d.Note += fmt.Sprintf(", bad checksum in ROBs %#x", bad)
		}
		d.ChecksumAbsent = none && d.ChecksumOK
		a.ROBs += len(robs)
		rep.Records++
		rep.Events++
		rep.Bytes += int64(len(buf))
		sizes = append(sizes, len(buf))
		rows.Add(d)
		off += int64(len(buf))
	}
	if a.fullEvents && rep.Events > 0 {
		rep.Start, rep.End = &start, &end
	}
	rep.Sources = summary.SortedKeys(sources)
	rep.NumSources = len(rep.Sources)
	if len(rep.Sources) > 0 {
		rep.SourcesText = fmt.Sprintf("%d: %s", rep.NumSources, hexSources(rep.Sources))
	}
	a.Runs = summary.SortedKeys(runs)
	rep.RecordBytes = summary.SizeStatsOf(sizes)
	rep.Detail = rows.Detail(summary.EventTable(hexSources))
	return rep, err
}

func orderName(o binary.ByteOrder) string {
	if o == binary.ByteOrder(binary.BigEndian) {
		return "big-endian"
	}
	return "little-endian"
}
