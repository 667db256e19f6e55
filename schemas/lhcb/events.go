package lhcb

import (
	"errors"
	"io"

	"github.com/sluice-daq/sluice/schemas"
)

// Event is one LHCb event as a stream yields it: the header of the record
// it came from and a body of raw banks.
type Event struct {
	Index  uint64 // position of the event in the stream, from 0
	Offset int64  // stream offset of the record holding the event
	// Header is the record's MDF header; for an event from a MEP, the MEP
	// record's header with the data type set to banks and the run, orbit
	// and bunch of the event's ODIN bank (the MEP wrapper's are not the
	// event's: LHCb writes 0 there).
	Header Header
	// Body is the raw banks, valid until the callback returns. For an event
	// from a MEP it is rebuilt (bank headers added to the fragments), so
	// offsets in it are not stream offsets.
	Body   []byte
	Record *Record // the record holding the event, valid until the callback returns
}

// ForEachEvent reads the MDF records of r (checksums verified) and calls fn
// for every event: once per data type 1 record with its body, and once per
// event of a data type 2 record (a MEP), whose banks are rebuilt from the
// transposed fragments. It stops at the end of the stream or at the first
// error, which it returns (fn's own errors unchanged; decode errors as
// *schemas.DecodeError with the stream offset of the record, for MEP
// contents the offset of the MEP record's body plus the offset in it).
func ForEachEvent(r io.Reader, fn func(ev *Event) error) error {
	return forEachEvent(r, ChecksumVerify, fn)
}

// forEachEvent is ForEachEvent with a choice of checksum handling.
func forEachEvent(r io.Reader, mode ChecksumMode, fn func(ev *Event) error) error {
	rd := NewReader(r)
	rd.Checksums = mode
	var (
		index uint64
		banks []Bank
		body  []byte
	)
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if rec.Header.BodyType() != DataTypeMEP {
			if err := fn(&Event{Index: index, Offset: rec.Offset, Header: rec.Header, Body: rec.Body, Record: rec}); err != nil {
				return err
			}
			index++
			continue
		}
		bodyAt := rec.Offset + int64(rec.Header.Len())
		m, err := DecodeMEP(rec.Body)
		if err != nil {
			return schemas.WithOffset(err, bodyAt)
		}
		for k := 0; k < m.PackingFactor; k++ {
			h := rec.Header
			h.DataType = DataTypeBanks
			banks = m.Event(k, banks[:0])
			body = body[:0]
			for _, b := range banks {
				// A MEP fragment holds at most 65535 bytes; longer ones
				// cannot be a raw bank payload.
				if body, err = AppendBank(body, b); err != nil {
					return schemas.Errorf(formatMEP, "fragment", bodyAt, schemas.ErrSizeOverflow, "event %d: %v", k, err)
				}
				if b.Type == BankTypeODIN {
					// An ODIN bank that does not decode is the splitter's
					// to report; the header keeps the MEP's fields then.
					if o, err := DecodeODIN(b.Version, b.Data); err == nil {
						h.Run, h.Orbit, h.Bunch = o.Run, o.Orbit, uint32(o.BunchID)
					}
				}
			}
			if err := fn(&Event{Index: index, Offset: rec.Offset, Header: h, Body: body, Record: rec}); err != nil {
				return err
			}
			index++
		}
	}
}
