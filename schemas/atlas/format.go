package atlas

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
	"github.com/sluice-daq/sluice/schemas/internal/summary"
)

// fullEventFormat is a stream of full events: it also splits and joins.
type fullEventFormat struct{ eformatStream }

var (
	_ format.Splitter = fullEventFormat{}
	_ format.Joiner   = fullEventFormat{}
)

// ExportName is "eformat".
func (fullEventFormat) ExportName() string { return "eformat" }

// NewJoiner returns a Joiner writing little-endian full events.
func (fullEventFormat) NewJoiner() format.EventJoiner { return Joiner{} }

// Sources reads every full event and groups the ROB source ids by
// sub-detector (bits 23:16 of the source id), in ascending order: group
// "subdet<xx>" (two hex digits) per sub-detector, then group "header" with
// the header fragment's HeaderSource.
func (fullEventFormat) Sources(r io.Reader) ([]schemas.SourceGroup, error) {
	seen := map[uint32]bool{}
	err := eachFullEvent(r, func(e *FullEvent, _ int64) error {
		for i := range e.ROBs {
			seen[e.ROBs[i].SourceID] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return summary.SubdetectorGroups(seen, HeaderSource), nil
}

// Split splits every full event (SplitFullEvent): one piece per event,
// its run the event's run number. An event whose own checksum fails is
// split all the same with every fragment flagged FlagSourceError, so that
// the builder marks it rather than losing it. Errors: the decoders',
// offsets in the stream, and SplitFullEvent's.
func (fullEventFormat) Split(r io.Reader, _ []schemas.SourceGroup, emit func(format.Piece) error) error {
	var frags []schemas.Fragment
	return eachFullEvent(r, func(e *FullEvent, off int64) error {
		var err error
		if frags, err = SplitFullEvent(frags[:0], e); err != nil {
			return fmt.Errorf("atlas: full event at byte %d: %w", off, err)
		}
		if !e.ChecksumOK {
			for i := range frags {
				frags[i].Flags |= schemas.FlagSourceError
			}
		}
		return emit(format.Piece{Run: e.RunNumber, Fragments: frags})
	})
}

// eachFullEvent decodes the full events of r in turn (each in the byte
// order of its marker) and calls fn with each and its offset in the
// stream. A full event whose own checksum fails is passed on with
// ChecksumOK false; any other decode error stops the reading,
// *schemas.DecodeError with the stream offset.
func eachFullEvent(r io.Reader, fn func(e *FullEvent, off int64) error) error {
	br := bufio.NewReader(r)
	var (
		buf []byte
		off int64
	)
	for {
		head, perr := br.Peek(8)
		if len(head) == 0 && perr == io.EOF {
			return nil
		}
		o := DetectOrder(head, MarkerFullEvent)
		if o == nil {
			return schemas.Errorf(fmtFull, "marker", off, schemas.ErrBadMagic, "want 0x%08x in either byte order, have % x", MarkerFullEvent, head[:min(4, len(head))])
		}
		if len(head) < 8 {
			return schemas.Errorf(fmtFull, "fragment_size", off+4, schemas.ErrTruncated, "need 8 bytes, the stream ends after %d", len(head))
		}
		var err error
		if buf, err = summary.ReadRecord(br, buf, max(4*uint64(o.Uint32(head[4:])), 8), off, fmtFull); err != nil {
			return err
		}
		e, _, _, err := DecodeFullEvent(buf)
		if err != nil && !errors.Is(err, schemas.ErrCRCMismatch) {
			return schemas.WithOffset(err, off)
		}
		if err := fn(&e, off); err != nil {
			return err
		}
		off += int64(len(buf))
	}
}
