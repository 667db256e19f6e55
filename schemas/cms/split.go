package cms

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
)

// Splitting and joining. SplitFRD sends one fragment per FED (source id =
// FED id, payload = the whole FED fragment) and one more, from
// HeaderSource, that carries what the FEDs do not: the FRD header (version,
// flags, run, luminosity section, event number, padding) and the FEDs'
// order in the event. Its payload, little-endian:
//
//	| off | size | field                                                    |
//	|-----|------|----------------------------------------------------------|
//	|   0 |    E | the event's FRD header as an FRD event without data      |
//	|     |      | (eventSize 0, checksum of nothing, v3/v4 padding bytes)  |
//	|   E |    4 | n: FEDs in the event (u32)                               |
//	| E+4 |   4n | FED id of FED i, i in data order (u32 each)              |
//
// so that Joiner.Join restores the event byte for byte.

// HeaderSource is the sluice source id of the FRD header fragment: one
// above the largest 12-bit FED id. Add it to the builder's source set.
const HeaderSource uint32 = MaxFEDID + 1

const joinFormat = "cms-join"

// SplitFRD turns one FRD event into sluice fragments appended to dst: one
// per FED in the order the FEDs lie in the event's data (source id = FED
// id, payload = the whole FED fragment, aliasing e.Data), then the header
// fragment (source HeaderSource, see above). Event id = e.Event for all;
// CRC = the CRC-32C of each payload. A FED whose CRC-16 does not match, or
// whose trailer has the R (wrong FED id) or F (SLINK error) bit set, is
// kept and flagged schemas.FlagSourceError, so the builder marks its event
// rather than losing it. Errors: those of WalkFEDs, and ErrInconsistent
// for a FED id found twice in one event (at the second one's offset).
func SplitFRD(dst []schemas.Fragment, e *FRDEvent) ([]schemas.Fragment, error) {
	first := len(dst)
	var seen [MaxFEDID + 1]bool
	var dup error
	err := WalkFEDs(e.Data, func(off int, f FED) bool {
		if seen[f.SourceID] {
			dup = schemas.Errorf(fedFormat, "header.Source_id", int64(off+1), schemas.ErrInconsistent, "FED %d appears twice in event %d", f.SourceID, e.Event)
			return false
		}
		seen[f.SourceID] = true
		var flags schemas.FragmentFlag
		if !f.CRCValid() || f.WrongFEDID || f.SlinkError {
			flags |= schemas.FlagSourceError
		}
		dst = append(dst, schemas.Fragment{
			SourceID: uint32(f.SourceID),
			EventID:  e.Event,
			Flags:    flags,
			CRC:      schemas.Checksum(f.raw),
			Payload:  f.raw,
		})
		return true
	})
	if err == nil {
		err = dup
	}
	if err != nil {
		return dst[:first], err
	}
	// The walk visits FEDs last to first; restore the data order.
	slices.Reverse(dst[first:])
	hdr := *e
	hdr.Data = nil
	h, err := AppendFRD(nil, &hdr)
	if err != nil {
		return dst[:first], err
	}
	h = binary.LittleEndian.AppendUint32(h, uint32(len(dst)-first))
	for _, f := range dst[first:] {
		h = binary.LittleEndian.AppendUint32(h, f.SourceID)
	}
	return append(dst, schemas.Fragment{SourceID: HeaderSource, EventID: e.Event, CRC: schemas.Checksum(h), Payload: h}), nil
}

// JoinFRD appends to dst an FRD event with the header fields of hdr
// (hdr.Data and hdr.Checksum are ignored) whose data is the FED fragments
// yielded by feds, concatenated in order. Each must be a whole, well-formed
// FED fragment; one whose CRC-16 fails is kept as it is, so the corruption
// stays visible. Errors: a malformed FED (its *schemas.DecodeError with
// offsets inside that fragment, wrapped with its index) or those of
// AppendFRD.
func JoinFRD(dst []byte, hdr *FRDEvent, feds iter.Seq[[]byte]) ([]byte, error) {
	var data []byte
	i := 0
	for b := range feds {
		if _, err := DecodeFED(b); err != nil && !errors.Is(err, schemas.ErrCRCMismatch) {
			return dst, fmt.Errorf("cms: join FED %d of event %d: %w", i, hdr.Event, err)
		}
		data = append(data, b...)
		i++
	}
	e := *hdr
	e.Data = data
	return AppendFRD(dst, &e)
}

// Joiner writes built events back as FRD events (format.EventJoiner). The
// zero value is ready; it holds no state.
type Joiner struct{}

// Join appends to dst the FRD event of row i of a batch built from
// split FRD events: the header from the header fragment, the FEDs from
// their sources' fragments in the order the header fragment lists (then
// any FED it does not list, in the batch's order). A FED that did not
// arrive (an incomplete event, see the row's missing sources) is left out,
// as CMS leaves out a FED that did not send. A row without a header
// source in the batch, built from bare FED fragments (a FEROL
// stream, received or split), becomes an FRD event as the CMS event
// builder writes one (see joinBareFEDs). Errors: format.ErrForeignEvents
// (the header fragment missing from a batch that has its source, or no header
// fragment and a source that is not a FED id: the events were not split
// from CMS data),
// *schemas.DecodeError wrapping ErrTruncated (a short
// header fragment), ErrInconsistent (a
// header fragment whose event number is not the row's, whose FED list does
// not fill it, or a fragment holding another FED than its source), or
// those of JoinFRD.
func (Joiner) Join(dst []byte, eb *schemas.EventBatch, i int) ([]byte, error) {
	frags, order := eb.PresentFragments(i) // order: sources in the batch's order
	id := eb.EventID(i)
	hp := frags[HeaderSource]
	if len(hp) == 0 {
		if _, expected := eb.Payload(HeaderSource, i); expected {
			// Split from FRD data, and its header fragment is missing.
			return dst, format.NoHeaderFragment(FRDFormat, HeaderSource, eb, i)
		}
		return joinBareFEDs(dst, eb, i, frags, order)
	}
	hdr, n, err := DecodeFRD(hp)
	if err != nil {
		return dst, err
	}
	le := binary.LittleEndian
	if len(hp) < n+4 {
		return dst, schemas.Errorf(joinFormat, "header fragment", int64(n), schemas.ErrTruncated, "need %d bytes for the FED count, have %d", n+4, len(hp))
	}
	count := le.Uint32(hp[n:])
	if uint64(len(hp)-n-4) != 4*uint64(count) {
		return dst, schemas.Errorf(joinFormat, "header fragment", int64(n), schemas.ErrInconsistent, "lists %d FEDs in %d bytes", count, len(hp)-n-4)
	}
	if hdr.Event != id {
		return dst, schemas.Errorf(joinFormat, "header fragment", int64(frdSizeOffset(hdr.Version)-4), schemas.ErrInconsistent, "holds event %d in the row of event %d", hdr.Event, id)
	}
	sources := schemas.JoinOrder(hp[n+4:], frags, order, HeaderSource)
	for _, src := range sources {
		p := frags[src]
		if len(p) >= FEDMinSize {
			if fed := uint32(le.Uint64(p) >> 8 & MaxFEDID); fed != src { // Source_id, bits 19:8
				return dst, schemas.Errorf(joinFormat, fmt.Sprintf("fragment of source %d", src), 1, schemas.ErrInconsistent, "event %d: holds FED %d", id, fed)
			}
		}
	}
	return JoinFRD(dst, &hdr, func(yield func([]byte) bool) {
		for _, src := range sources {
			if !yield(frags[src]) {
				return
			}
		}
	})
}

// BareFRDVersion is the FRD version of events joined from bare FED
// fragments: version 6, what the CMS event builder writes in Run 3.
const BareFRDVersion = 6

// joinBareFEDs appends the FRD event of row i, which has FED fragments but
// no header fragment (events built from FEROL streams): version
// BareFRDVersion, flags 0, the row's run, luminosity section 0 (a FEROL
// stream does not carry it), event number the row's event id (its low 32
// bits: FRD v6 has 32), the FEDs in ascending FED id order. Errors:
// format.ErrForeignEvents (a source over the 12-bit FED id), ErrInconsistent
// (a fragment holding another FED than its source), JoinFRD's.
func joinBareFEDs(dst []byte, eb *schemas.EventBatch, i int, frags map[uint32][]byte, order []uint32) ([]byte, error) {
	id := eb.EventID(i)
	sources := slices.Sorted(slices.Values(order))
	for _, src := range sources {
		if src > MaxFEDID {
			return dst, format.ForeignEvents(FRDFormat, eb, i, "has no header fragment (source %#x) and a fragment of source %d, not a 12-bit FED id", HeaderSource, src)
		}
		if p := frags[src]; len(p) >= FEDWordSize {
			if fed := uint32(binary.LittleEndian.Uint64(p) >> 8 & MaxFEDID); fed != src {
				return dst, schemas.Errorf(joinFormat, fmt.Sprintf("fragment of source %d", src), 1, schemas.ErrInconsistent, "event %d: holds FED %d", id, fed)
			}
		}
	}
	hdr := FRDEvent{Version: BareFRDVersion, Run: eb.Run(i), Event: id & 0xFFFFFFFF}
	return JoinFRD(dst, &hdr, func(yield func([]byte) bool) {
		for _, src := range sources {
			if !yield(frags[src]) {
				return
			}
		}
	})
}
