package atlas

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
)

// Splitting and joining. SplitFullEvent sends one fragment per ROB (source
// id = the ROB's source id, payload = the ROB fragment) and one more, from
// HeaderSource, carrying what the ROBs do not: the full-event header (event
// builder source id, status, checksum type, bunch-crossing time, global_id,
// run type and number, lumi block, lvl1_id, BCID, trigger type, the L1, L2
// and EF info words and the stream tags) and the ROBs' order in the event.
// Its payload, little-endian 32-bit words:
//
//	| word | count | field                                                 |
//	|------|-------|-------------------------------------------------------|
//	|    0 |     E | the event's header as a v4.0 full event without ROBs  |
//	|    E |     1 | n: ROBs in the event                                  |
//	|  E+1 |     n | source id of ROB i, i in event order                  |
//
// so that Joiner.Join restores the event.

// HeaderSource is the sluice source id of the full-event header fragment:
// eformat ROB source ids use the low 24 bits (sub-detector, module), so
// this one is never a ROB's. Add it to the builder's source set.
const HeaderSource uint32 = 0xFFFFFFFF

const joinFormat = "atlas-join"

// SplitFullEvent turns a decoded full event into sluice fragments appended
// to dst: one per ROB in the event's order, then the header fragment (see
// above). Source id = the ROB's source id; event id = e.GlobalID for all
// (the event builder's id, unique within a run, where lvl1_id restarts at
// every ECR); payload = the ROB fragment in little-endian byte order; CRC
// = the CRC-32C of each payload. A decoded ROB travels as the bytes it was
// decoded from (aliasing the input when it was little-endian, else the
// decoder's swapped copy), even if its fields were changed since; ROBs
// built by hand are encoded. A ROB whose checksum failed or whose generic
// status bits are set is kept and flagged schemas.FlagSourceError, so the
// builder marks its event instead of losing it. Errors: two ROBs with one
// source id, or a ROB with HeaderSource's id (schemas.ErrInconsistent), or
// an unknown checksum type.
func SplitFullEvent(dst []schemas.Fragment, e *FullEvent) ([]schemas.Fragment, error) {
	n := 0
	seen := make(map[uint32]bool, len(e.ROBs))
	for i := range e.ROBs {
		src := e.ROBs[i].SourceID
		if seen[src] || src == HeaderSource {
			return dst, fmt.Errorf("atlas: full event %d: ROB 0x%08x twice or with the header fragment's id: %w", e.GlobalID, src, schemas.ErrInconsistent)
		}
		seen[src] = true
		if e.ROBs[i].le == nil {
			n += 4 * e.ROBs[i].Words()
		}
	}
	first := len(dst)
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
				return dst[:first], err
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
	hdr := *e
	hdr.ROBs = nil
	h, err := AppendFullEvent(nil, &hdr, binary.LittleEndian)
	if err != nil {
		return dst[:first], err
	}
	h = binary.LittleEndian.AppendUint32(h, uint32(len(e.ROBs)))
	for i := range e.ROBs {
		h = binary.LittleEndian.AppendUint32(h, e.ROBs[i].SourceID)
	}
	return append(dst, schemas.Fragment{SourceID: HeaderSource, EventID: uint64(e.GlobalID), CRC: schemas.Checksum(h), Payload: h}), nil
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

// Joiner writes built events back as full events (format.EventJoiner) in
// byte order Order (little-endian when nil, as sluice splits them).
type Joiner struct {
	Order ByteOrder
}

// Join appends to dst, in byte order j.Order, the full event of
// row i of a batch built from split full events: the header from the
// header fragment, the ROBs from their sources' fragments in the order the
// header fragment lists (then any ROB it does not list, in the batch's
// order). A ROB that did not arrive (an incomplete event, see the row's
// missing sources) is left out, as the ATLAS event builder leaves out a
// ROB it did not get. Errors: format.ErrForeignEvents (no header
// fragment: the events were not split from eformat data),
// *schemas.DecodeError wrapping ErrTruncated (a short header fragment),
// DecodeFullEvent's errors for a malformed header fragment, ErrInconsistent (a header whose global_id is not the
// row's event id, a ROB list that does not fill the fragment, a fragment
// holding another source's ROB), or those of JoinFullEvent.
func (j Joiner) Join(dst []byte, eb *schemas.EventBatch, i int) ([]byte, error) {
	o := j.Order
	if o == nil {
		o = binary.LittleEndian
	}
	frags, order := eb.PresentFragments(i) // order: sources in the batch's order
	id := eb.EventID(i)
	hp := frags[HeaderSource]
	if len(hp) == 0 {
		return dst, format.NoHeaderFragment(FullEventFormat, HeaderSource, eb, i)
	}
	hdr, n, _, err := DecodeFullEvent(hp)
	if err != nil {
		return dst, err
	}
	le := binary.LittleEndian
	if len(hp) < n+4 {
		return dst, schemas.Errorf(joinFormat, "header fragment", int64(n), schemas.ErrTruncated, "need %d bytes for the ROB count, have %d", n+4, len(hp))
	}
	count := le.Uint32(hp[n:])
	if uint64(len(hp)-n-4) != 4*uint64(count) {
		return dst, schemas.Errorf(joinFormat, "header fragment", int64(n), schemas.ErrInconsistent, "lists %d ROBs in %d bytes", count, len(hp)-n-4)
	}
	if uint64(hdr.GlobalID) != id {
		return dst, schemas.Errorf(joinFormat, "header fragment", 4*int64(9+len(hdr.Status)), schemas.ErrInconsistent, "holds global_id %d in the row of event %d", hdr.GlobalID, id)
	}
	sources := schemas.JoinOrder(hp[n+4:], frags, order, HeaderSource)
	for _, src := range sources {
		if p := frags[src]; len(p) >= 20 {
			if rob := le.Uint32(p[16:]); rob != src { // w4, the ROB's source id
				return dst, schemas.Errorf(joinFormat, fmt.Sprintf("fragment of source %#x", src), 16, schemas.ErrInconsistent, "event %d: holds ROB %#x", id, rob)
			}
		}
	}
	return JoinFullEvent(dst, &hdr, func(yield func([]byte) bool) {
		for _, src := range sources {
			if !yield(frags[src]) {
				return
			}
		}
	}, o)
}
