package cms

import (
	"errors"
	"io"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
	"github.com/sluice-daq/sluice/schemas/internal/summary"
)

var (
	_ format.Splitter = frdStream{}
	_ format.Joiner   = frdStream{}
)

// ExportName is "frd": FRD events back to back, without a file header.
func (frdStream) ExportName() string { return "frd" }

// NewJoiner returns a Joiner.
func (frdStream) NewJoiner() format.EventJoiner { return Joiner{} }

// Sources reads every event and returns its FED ids, ascending, as group
// "fed", then group "header" with the header fragment's HeaderSource.
func (frdStream) Sources(r io.Reader) ([]schemas.SourceGroup, error) {
	feds := map[uint32]bool{}
	err := eachFRD(r, func(e *FRDEvent, _ int64, _ bool) error {
		return WalkFEDs(e.Data, func(_ int, f FED) bool {
			feds[uint32(f.SourceID)] = true
			return true
		})
	})
	if err != nil {
		return nil, err
	}
	return []schemas.SourceGroup{{Name: "fed", Sources: summary.SortedKeys(feds)}, {Name: "header", Sources: []uint32{HeaderSource}}}, nil
}

// Split splits every event (SplitFRD): one piece per event, its run the
// event's. An event whose checksum fails is split all the same with every
// fragment flagged FlagSourceError, so that the builder marks it rather
// than losing it. Errors: FileReader's and SplitFRD's, offsets in the
// stream.
func (frdStream) Split(r io.Reader, _ []schemas.SourceGroup, emit func(format.Piece) error) error {
	var frags []schemas.Fragment
	return eachFRD(r, func(e *FRDEvent, off int64, checksumOK bool) error {
		var err error
		if frags, err = SplitFRD(frags[:0], e); err != nil {
			// Offsets in the FED data are relative to the data, which
			// starts after the event's header.
			return schemas.WithOffset(err, off+int64(FRDHeaderSize(e.Version)))
		}
		if !checksumOK {
			for i := range frags {
				frags[i].Flags |= schemas.FlagSourceError
			}
		}
		return emit(format.Piece{Run: e.Run, Fragments: frags})
	})
}

// eachFRD calls fn with every event of the FRD stream r, its offset and
// whether its checksum matched. Errors: FileReader's other than
// ErrCRCMismatch, and fn's.
func eachFRD(r io.Reader, fn func(e *FRDEvent, off int64, checksumOK bool) error) error {
	fr, err := NewFileReader(r)
	if err != nil {
		return err
	}
	for {
		off := fr.Offset()
		e, err := fr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil && !errors.Is(err, schemas.ErrCRCMismatch) {
			return err
		}
		if err := fn(&e, off, err == nil); err != nil {
			return err
		}
	}
}
