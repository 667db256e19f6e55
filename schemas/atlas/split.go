package atlas

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"

	"github.com/sluice-daq/sluice/schemas"
)

// SplitFullEvent turns a decoded full event into sluice fragments, one per
// ROB in the event's order, appended to dst: source id = the ROB's source
// id, event id = e.GlobalID (the event builder's id, unique within a run;
// lvl1_id restarts at every ECR and so is not), payload = the ROB fragment
// in little-endian byte order, CRC = the CRC-32C of that payload. A
// decoded ROB travels as the bytes it was decoded from (aliasing the input
// when it was little-endian, else the decoder's swapped copy), even if its
// fields were changed since; ROBs built by hand are encoded. A ROB whose checksum failed or whose generic
// status bits are set is kept and flagged schemas.FlagSourceError, so the
// builder marks its event instead of losing it. Errors: two ROBs with one
// source id (schemas.ErrInconsistent).
func SplitFullEvent(dst []schemas.Fragment, e *FullEvent) ([]schemas.Fragment, error) {
	n := 0
	seen := make(map[uint32]bool, len(e.ROBs))
	for i := range e.ROBs {
		if seen[e.ROBs[i].SourceID] {
			return dst, fmt.Errorf("atlas: full event %d holds ROB 0x%08x twice: %w", e.GlobalID, e.ROBs[i].SourceID, schemas.ErrInconsistent)
		}
		seen[e.ROBs[i].SourceID] = true
		if e.ROBs[i].le == nil {
			n += 4 * e.ROBs[i].Words()
		}
	}
	// Decoded ROBs already have their little-endian bytes; only ROBs built
	// by hand are encoded, into one buffer.
	buf := make([]byte, 0, n)
	var words []uint32
	for i := range e.ROBs {
		r := &e.ROBs[i]
		p := r.le
		if p == nil {
			var err error
			if words, err = r.AppendWords(words[:0]); err != nil {
				return dst, err
			}
			start := len(buf)
			buf = appendWords(buf, binary.LittleEndian, words...)
			p = buf[start:len(buf):len(buf)]
		}
		var flags schemas.FragmentFlag
		if !r.ChecksumOK || r.GenericStatus() != 0 {
			flags |= schemas.FlagSourceError
		}
		dst = append(dst, schemas.Fragment{SourceID: r.SourceID, EventID: uint64(e.GlobalID), Flags: flags, CRC: schemas.Checksum(p), Payload: p})
	}
	return dst, nil
}

// JoinFullEvent appends to dst a v4.0 full event with the header fields of
// hdr (its ROBs and checksums ignored) and the ROB fragments yielded by robs,
// in order, written in byte order o. Each must be a well-formed ROB
// fragment; one whose checksum fails is written with the checksum it
// carries, so the corruption stays visible. Errors: a malformed ROB (its
// *schemas.DecodeError, offsets inside that fragment, wrapped with its
// index) or those of AppendFullEvent.
func JoinFullEvent(dst []byte, hdr *FullEvent, robs iter.Seq[[]byte], o ByteOrder) ([]byte, error) {
	e := *hdr
	e.ROBs = nil
	i := 0
	for b := range robs {
		r, n, _, err := DecodeROB(b)
		if errors.Is(err, schemas.ErrCRCMismatch) {
			err = nil // kept with its stored checksum, as the source sent it
		}
		if err == nil && n != len(b) {
			err = schemas.Errorf(fmtROB, "fragment_size", 4, schemas.ErrInconsistent, "fragment_size %d bytes, payload holds %d", n, len(b))
		}
		if err != nil {
			return dst, fmt.Errorf("atlas: join ROB %d of event %d: %w", i, hdr.GlobalID, err)
		}
		e.ROBs = append(e.ROBs, r)
		i++
	}
	return AppendFullEvent(dst, &e, o)
}

// JoinFullEventBatch appends to dst the full event for row i of a built
// event batch, written little-endian: run number and global_id (the event
// id, which must fit 32 bits) from the row, the other header fields from
// hdr, and the ROB fragments = the payloads of every source of every group
// in the batch's order, each a ROB fragment whose source id must equal its
// source. Sources that sent nothing are left out. Errors: those of
// JoinFullEvent, an event id over 32 bits, and a ROB under another source.
func JoinFullEventBatch(dst []byte, eb *schemas.EventBatch, i int, hdr *FullEvent) ([]byte, error) {
	id := eb.EventID(i)
	if id > 0xFFFFFFFF {
		return dst, fmt.Errorf("atlas: event id %d does not fit the 32-bit global_id of eformat 4.0", id)
	}
	var mismatch error
	robs := func(yield func([]byte) bool) {
		for g := range eb.Groups {
			cont := true
			eb.Fragments(g, i, func(source uint32, payload []byte) bool {
				if len(payload) == 0 {
					return true
				}
				if len(payload) >= 20 {
					if sid := binary.LittleEndian.Uint32(payload[16:]); sid != source { // w4, source id
						mismatch = fmt.Errorf("atlas: join event %d: source 0x%08x holds ROB 0x%08x", id, source, sid)
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
	e := *hdr
	e.GlobalID, e.RunNumber = uint32(id), eb.Run(i)
	out, err := JoinFullEvent(dst, &e, robs, binary.LittleEndian)
	if mismatch != nil {
		return dst, mismatch
	}
	return out, err
}
