package cms

import (
	"encoding/binary"
	"fmt"
	"iter"
	"slices"

	"github.com/sluice-daq/sluice/schemas"
)

// SplitFRD turns one FRD event into sluice fragments, one per FED, appended
// to dst in the order the FEDs lie in the event's data: source id = FED id,
// event id = e.Event, payload = the whole FED fragment (aliasing e.Data),
// CRC = the CRC-32C of that payload. A FED whose CRC-16 does not match, or
// whose trailer has the R (wrong FED id) or F (SLINK error) bit set, is
// kept and flagged schemas.FlagSourceError, so the builder marks its event
// rather than losing it. Errors: those of WalkFEDs, and ErrInconsistent for
// a FED id found twice in one event (at the second one's offset).
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
	return dst, nil
}

// JoinFRD appends to dst an FRD event with the header fields of hdr
// (hdr.Data and hdr.Checksum are ignored) whose data is the FED fragments
// yielded by feds, concatenated in order. Each must be a whole, well-formed
// FED fragment (checked with DecodeFED, CRC included). Errors: a malformed
// FED (as a *schemas.DecodeError with its offset inside that fragment,
// wrapped with its index) or those of AppendFRD.
func JoinFRD(dst []byte, hdr *FRDEvent, feds iter.Seq[[]byte]) ([]byte, error) {
	var data []byte
	i := 0
	for b := range feds {
		if _, err := DecodeFED(b); err != nil {
			return dst, fmt.Errorf("cms: join FED %d of event %d: %w", i, hdr.Event, err)
		}
		data = append(data, b...)
		i++
	}
	e := *hdr
	e.Data = data
	return AppendFRD(dst, &e)
}

// JoinFRDBatch appends to dst the FRD event (of the given version and
// luminosity section) for row i of a built event batch: run and event
// number from the row, data = the payloads of every source of every group,
// in the batch's group and source order, each a FED fragment whose FED id
// must equal its source id. Sources that sent nothing (empty payload) are
// left out, as a FED that did not send is absent from a CMS event. Errors:
// those of JoinFRD, and a FED whose id differs from its source id.
func JoinFRDBatch(dst []byte, eb *schemas.EventBatch, i int, version uint16, lumi uint32) ([]byte, error) {
	var mismatch error
	feds := func(yield func([]byte) bool) {
		for g := range eb.Groups {
			cont := true
			eb.Fragments(g, i, func(source uint32, payload []byte) bool {
				if len(payload) == 0 {
					return true
				}
				if len(payload) >= FEDMinSize {
					if id := uint32(binary.LittleEndian.Uint64(payload) >> 8 & MaxFEDID); id != source { // Source_id, bits 19:8
						mismatch = fmt.Errorf("cms: join event %d: source %d holds FED %d", eb.EventID(i), source, id)
						cont = false
						return false
					}
				}
				cont = yield(payload)
				return cont
			})
			if !cont {
				return
			}
		}
	}
	hdr := FRDEvent{Version: version, Run: eb.Run(i), Lumi: lumi, Event: eb.EventID(i)}
	out, err := JoinFRD(dst, &hdr, feds)
	if mismatch != nil {
		return dst, mismatch
	}
	return out, err
}
