package cms

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
	"github.com/sluice-daq/sluice/schemas/internal/summary"
)

// FEROLFormat is the CMS FEROL -> DAQ TCP stream (see FEROLBlock) as
// registered in schemas/formats: FEROL blocks back to back, each run of
// first..last blocks one FED fragment. It splits into one sluice fragment
// per FED fragment (source = FED id, event id = the FEROL event number,
// payload = the whole FED fragment) and joins back, export name "ferol",
// into FEROL blocks: byte for byte the stream it came from when that
// stream was framed as the FEROL frames (full blocks, reserved bits zero;
// inspect counts fragments framed otherwise).
var FEROLFormat format.Format = ferolStream{}

type ferolStream struct{}

func (ferolStream) Name() string       { return ferolFormat }
func (ferolStream) Sign() string       { return "a CMS FEROL block header (0x475A, big-endian)" }
func (ferolStream) ExportName() string { return "ferol" }

// Detect is Certain for a first block header (signature, first-block bit,
// a valid length) whose payload starts with a FED header word (BOE_1) and,
// when head holds it, is followed by another valid block header.
func (ferolStream) Detect(head []byte) format.Match {
	h, err := DecodeFEROLBlock(head)
	if err != nil || !h.First || len(head) < FEROLHeaderSize+FEDWordSize || head[FEROLHeaderSize+7]>>4 != FEDHeaderMarker {
		return format.NoMatch
	}
	next := FEROLHeaderSize + int(h.Words)*FEDWordSize
	if len(head) >= next+FEROLHeaderSize {
		if _, err := DecodeFEROLBlock(head[next:]); err != nil {
			return format.NoMatch
		}
	}
	return format.Certain
}

// FEROLReport is what only FEROL streams have: the section "cms" of their
// inspect report.
type FEROLReport struct {
	Blocks        int         `json:"ferol_blocks"`
	Fragments     int         `json:"fed_fragments"`
	PerFED        map[int]int `json:"fragments_per_fed"`
	EventRange    [2]uint32   `json:"event_range"` // first and last event number
	BlocksPerFrag [2]int      `json:"blocks_per_fragment"`
	FEDCRCBad     int         `json:"fed_crc_bad"`
	FEDErrorBits  int         `json:"fed_error_bits"` // FEDs with R or F set
	// HeaderMismatch counts fragments whose FED header's Source_id or
	// LV1_id (low 24 bits) differ from their FEROL headers'.
	HeaderMismatch int `json:"header_mismatch"`
	// NotCanonical counts fragments not framed as the FEROL frames (see
	// FEROLFragment.Canonical): joining gives them back re-framed.
	NotCanonical int `json:"not_canonical"`
}

// Key is the section's JSON key.
func (*FEROLReport) Key() string { return "cms" }

// Lines writes the section's text lines.
func (c *FEROLReport) Lines(line format.LineFunc) {
	line("FEROL blocks", "%d, %d .. %d per FED fragment, %d fragments not framed as the FEROL frames", c.Blocks, c.BlocksPerFrag[0], c.BlocksPerFrag[1], c.NotCanonical)
	line("FED fragments", "%d (%s), %d with a bad CRC-16, %d with R/F error bits, %d whose FED header disagrees with the FEROL header", c.Fragments, summary.CountMap(c.PerFED), c.FEDCRCBad, c.FEDErrorBits, c.HeaderMismatch)
	line("event numbers", "%d .. %d", c.EventRange[0], c.EventRange[1])
}

// ferolFED decodes f's FED fragment and says what is wrong with it but
// fatal: a bad CRC-16, R/F error bits, FED header fields other than the
// FEROL header's. Errors: DecodeFED's other than ErrCRCMismatch, at the
// stream offset.
func ferolFED(f *FEROLFragment) (fed FED, crcOK, errBits, mismatch bool, err error) {
	fed, err = DecodeFED(f.Data)
	if err != nil && !errors.Is(err, schemas.ErrCRCMismatch) {
		var de *schemas.DecodeError
		if errors.As(err, &de) {
			return fed, false, false, false, schemas.Errorf(ferolFormat, "FED "+de.Field, f.StreamOffset(de.Offset), de.Err, "FED %d event %d: %s", f.FEDID, f.Event, de.Detail)
		}
		return fed, false, false, false, err
	}
	return fed, err == nil, fed.WrongFEDID || fed.SlinkError, fed.SourceID != f.FEDID || fed.LV1ID != f.Event, nil
}

// Inspect reads the stream's FED fragments and checks every CRC-16.
func (ferolStream) Inspect(s *format.Stream, maxEvents int) (*format.Report, error) {
	c := &FEROLReport{PerFED: map[int]int{}}
	rep := &format.Report{Format: ferolFormat, RecordUnit: "FED fragment", Checksums: format.Checksums{What: "FED CRC-16"}, Section: c}
	feds, events := map[uint32]bool{}, map[uint32]bool{}
	rows := summary.Records{Max: maxEvents}
	var sizes []int
	finish := func() *format.Report {
		rep.Sources = summary.SortedKeys(feds)
		rep.NumSources = len(rep.Sources)
		rep.Events = len(events)
		rep.RecordBytes = summary.SizeStatsOf(sizes)
		rep.Detail = rows.Detail(summary.EventTable(schemas.FormatSourceList))
		return rep
	}
	fr := NewFEROLReader(s)
	for {
		f, err := fr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return finish(), err
		}
		fed, crcOK, errBits, mismatch, err := ferolFED(&f)
		if err != nil {
			return finish(), err
		}
		d := summary.Record{Kind: "FED fragment", Index: rep.Records, Offset: f.Offset, Bytes: int(fr.Offset() - f.Offset), EventID: uint64(f.Event), Sources: []uint32{uint32(f.FEDID)}, ChecksumOK: crcOK}
		d.Note = fmt.Sprintf("%s, %d bytes, LV1 %d, BX %d", format.Plural(f.Blocks, "block"), len(f.Data), fed.LV1ID, fed.BXID)
		if crcOK {
			rep.Checksums.Valid++
		} else {
			rep.Checksums.Bad++
			c.FEDCRCBad++
			d.Note += ", bad CRC-16"
		}
		if errBits {
			c.FEDErrorBits++
			d.Note += ", R/F error bits"
		}
		if mismatch {
			c.HeaderMismatch++
			d.Note += fmt.Sprintf(", FED header says FED %d LV1 %d", fed.SourceID, fed.LV1ID)
		}
		if !f.Canonical {
			c.NotCanonical++
			d.Note += ", not framed as the FEROL frames"
		}
		if c.Fragments == 0 {
			c.EventRange[0], c.BlocksPerFrag = f.Event, [2]int{f.Blocks, f.Blocks}
		}
		c.EventRange[1] = f.Event
		c.BlocksPerFrag = [2]int{min(c.BlocksPerFrag[0], f.Blocks), max(c.BlocksPerFrag[1], f.Blocks)}
		c.Blocks += f.Blocks
		c.Fragments++
		c.PerFED[int(f.FEDID)]++
		feds[uint32(f.FEDID)], events[f.Event] = true, true
		rep.Records++
		rep.Bytes += int64(d.Bytes)
		sizes = append(sizes, d.Bytes)
		rows.Add(d)
	}
	return finish(), nil
}

// Sources returns the stream's FED ids as one group "fed", ascending.
func (ferolStream) Sources(r io.Reader) ([]schemas.SourceGroup, error) {
	ids := map[uint32]bool{}
	fr := NewFEROLReader(r)
	for {
		f, err := fr.Next()
		if err == io.EOF {
			return []schemas.SourceGroup{{Name: "fed", Sources: summary.SortedKeys(ids)}}, nil
		}
		if err != nil {
			return nil, err
		}
		ids[uint32(f.FEDID)] = true
	}
}

// Split emits one piece per FED fragment of the stream: one fragment of
// source FED id, event id the FEROL event number, payload the whole FED
// fragment, CRC its CRC-32C. A FED with a bad CRC-16, R/F error bits or a
// FED header disagreeing with its FEROL header is kept and flagged
// schemas.FlagSourceError. Errors: FEROLReader.Next's, DecodeFED's other
// than ErrCRCMismatch (at the stream offset), emit's.
func (ferolStream) Split(r io.Reader, _ []schemas.SourceGroup, emit func(format.Piece) error) error {
	fr := NewFEROLReader(r)
	frag := make([]schemas.Fragment, 1)
	for {
		f, err := fr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		_, crcOK, errBits, mismatch, err := ferolFED(&f)
		if err != nil {
			return err
		}
		var flags schemas.FragmentFlag
		if !crcOK || errBits || mismatch {
			flags |= schemas.FlagSourceError
		}
		frag[0] = schemas.Fragment{SourceID: uint32(f.FEDID), EventID: uint64(f.Event), Flags: flags, CRC: schemas.Checksum(f.Data), Payload: f.Data}
		if err := emit(format.Piece{Fragments: frag}); err != nil {
			return err
		}
	}
}

var _ format.Framer = ferolStream{}

// Framing is "ferol": a FEROL's TCP stream carries FED fragments as their
// FEROL blocks.
func (ferolStream) Framing() string { return "ferol" }

// Frames hands on each FED fragment's FEROL blocks as they lie in data,
// with the FED id (source) and FEROL event number (event id). Errors:
// FEROLReader.Next's, at the stream offset.
func (ferolStream) Frames(data []byte, emit func(format.Frame) error) error {
	fr := NewFEROLReader(bytes.NewReader(data))
	for {
		at := fr.Offset()
		f, err := fr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := emit(format.Frame{Bytes: data[at:fr.Offset():fr.Offset()], Source: uint32(f.FEDID), Event: uint64(f.Event), Fragments: 1}); err != nil {
			return err
		}
	}
}

// NewJoiner returns a joiner writing built events as FEROL blocks.
func (ferolStream) NewJoiner() format.EventJoiner { return ferolJoiner{} }

type ferolJoiner struct{}

// Join appends row i's FED fragments, in the batch's source order, each
// framed as the FEROL frames it (AppendFEROL) with the row's FED id and
// the low 24 bits of its event id (the FEROL's event number). A FED that
// did not arrive is left out. Errors: format.ErrForeignEvents (a source
// over the 12-bit FED id: the events were not split from CMS data),
// *schemas.DecodeError wrapping ErrInconsistent (a fragment holding
// another FED than its source) or ErrBadHeader (a fragment not a whole
// number of 64-bit words).
func (ferolJoiner) Join(dst []byte, eb *schemas.EventBatch, i int) ([]byte, error) {
	frags, order := eb.PresentFragments(i)
	id := eb.EventID(i)
	slices.Sort(order)
	for _, src := range order {
		p := frags[src]
		if src > MaxFEDID {
			return dst, format.ForeignEvents(FEROLFormat, eb, i, "has a fragment of source %d, not a 12-bit FED id", src)
		}
		if len(p) >= FEDWordSize {
			if fed := uint32(binary.LittleEndian.Uint64(p) >> 8 & MaxFEDID); fed != src {
				return dst, schemas.Errorf(joinFormat, fmt.Sprintf("fragment of source %d", src), 1, schemas.ErrInconsistent, "event %d: holds FED %d", id, fed)
			}
		}
		var err error
		if dst, err = AppendFEROL(dst, uint16(src), uint32(id), p); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// FEROLCheck is what is wrong with a FEROL fragment's FED fragment short
// of not decoding: each makes the fragment flagged schemas.FlagSourceError
// where it is split or received.
type FEROLCheck struct {
	BadCRC    bool // the FED trailer's CRC-16 does not match
	ErrorBits bool // the trailer's R (wrong FED id) or F (SLINK error) bit
	// Mismatch: the FED header's Source_id or LV1_id differs from the
	// FEROL headers' FED id or event number.
	Mismatch bool
}

// Flagged says whether anything is wrong.
func (c FEROLCheck) Flagged() bool { return c.BadCRC || c.ErrorBits || c.Mismatch }

// CheckFEROLFragment decodes f's FED fragment and says what is wrong with
// it. Errors: DecodeFED's other than ErrCRCMismatch (a FED fragment that
// does not decode: markers, Evt_lgth, size), at the stream offset.
func CheckFEROLFragment(f *FEROLFragment) (FED, FEROLCheck, error) {
	fed, crcOK, errBits, mismatch, err := ferolFED(f)
	return fed, FEROLCheck{BadCRC: !crcOK, ErrorBits: errBits, Mismatch: mismatch}, err
}

// EventUnwrapper extends the FEROL's 24-bit event numbers of one stream to
// 64-bit event ids, counting wraps: a number more than half the range
// below the last one seen starts the next wrap, one more than half above
// it is a straggler from the wrap before. The FEROL and the FED header
// count 24 bits (16.7 million events: under three minutes at 100 kHz), so
// a run's event ids would repeat without it. Every stream of a run starts
// at its first event, so streams unwrap alike. The zero value is ready.
type EventUnwrapper struct {
	wraps   uint64
	last    uint32
	started bool
}

// Event returns the 64-bit event id of the 24-bit event number n.
func (u *EventUnwrapper) Event(n uint32) uint64 {
	n &= ferolMaxEvent
	const half = (ferolMaxEvent + 1) / 2
	switch {
	case !u.started:
		u.started = true
	case n < u.last && u.last-n > half:
		u.wraps++
	case n > u.last && n-u.last > half && u.wraps > 0:
		return (u.wraps-1)<<24 | uint64(n) // not the stream's newest: last stays
	}
	u.last = n
	return u.wraps<<24 | uint64(n)
}
