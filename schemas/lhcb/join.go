package lhcb

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
)

const formatJoin = "lhcb-join"

// Joiner turns built sluice events back into MDF records: the header from
// the header fragment (see split.go), the banks from the source fragments,
// in the original order of the event, which the header fragment lists. The
// result of joining an event split from an uncompressed record with a valid
// checksum is that record, byte for byte. Not safe for concurrent use.
type Joiner struct {
	// Level is the zlib level of the written bodies (0 = uncompressed).
	Level int

	frags  map[uint32][]byte // source id -> its payload in the event
	cursor map[uint32]int    // source id -> bytes of its payload already joined
	body   []byte
}

// NewJoiner returns a Joiner writing uncompressed records.
func NewJoiner() *Joiner { return &Joiner{frags: map[uint32][]byte{}, cursor: map[uint32]int{}} }

// Join appends to dst the MDF record of row i of a batch built from split
// MDF events, with a freshly computed size and checksum. Errors are
// *schemas.DecodeError whose Field names the fragment and whose Offset is
// the offset in that fragment's payload, except for a missing header
// fragment (format.ErrForeignEvents: the events were not split from LHCb
// data): the header fragment is malformed (ErrTruncated, DecodeHeader's
// errors), a bank the header
// fragment lists is missing (ErrInconsistent, e.g. an incomplete event), a
// bank is malformed (DecodeBank's errors), is not of the source whose
// fragment holds it, a fragment holds banks the header fragment does not
// list, or the banks do not make the record size the header gives
// (ErrInconsistent).
func (j *Joiner) Join(dst []byte, eb *schemas.EventBatch, i int) ([]byte, error) {
	return j.join(dst, eb, i, nil)
}

var _ format.VerdictJoiner = (*Joiner)(nil)

// JoinVerdict is Join with the event's trigger verdict, written into a
// header that has no trigger mask of its own (all four words zero, as the
// events of a MEP have: the MEP wrapper's mask is not theirs) as
// TriggerMaskOf(v). A header with a mask keeps it, so that an MDF event
// comes back byte for byte.
func (j *Joiner) JoinVerdict(dst []byte, eb *schemas.EventBatch, i int, v schemas.Verdict) ([]byte, error) {
	return j.join(dst, eb, i, &v)
}

// TriggerMaskOf is the MDF trigger mask sluice writes for a verdict: words
// 0 and 1 the lines that fired (bit i the deciding stage's line i; word 0
// lines 0-31, word 1 lines 32-63), word 2 the decision (1 accept, 2
// reject, 3 defer), word 3 zero.
func TriggerMaskOf(v schemas.Verdict) [4]uint32 {
	return [4]uint32{uint32(v.Lines), uint32(v.Lines >> 32), uint32(v.Decision), 0}
}

func (j *Joiner) join(dst []byte, eb *schemas.EventBatch, i int, v *schemas.Verdict) ([]byte, error) {
	clear(j.frags)
	clear(j.cursor)
	eb.EachFragment(i, func(source uint32, payload []byte) bool {
		j.frags[source] = payload
		return true
	})
	hp := j.frags[HeaderSource]
	if len(hp) == 0 {
		return dst, format.NoHeaderFragment(MDFFormat, HeaderSource, eb, i)
	}
	h, err := DecodeHeader(hp)
	if err != nil {
		return dst, err
	}
	le := binary.LittleEndian
	hl := h.Len()
	if len(hp) < hl+4 {
		return dst, schemas.Errorf(formatJoin, "header fragment", int64(hl), schemas.ErrTruncated, "need %d bytes, have %d", hl+4, len(hp))
	}
	n := le.Uint32(hp[hl:])
	if uint64(len(hp)-hl-4) != 4*uint64(n) {
		return dst, schemas.Errorf(formatJoin, "header fragment", int64(hl), schemas.ErrInconsistent, "lists %d banks in %d bytes", n, len(hp)-hl-4)
	}
	j.body = j.body[:0]
	for k := 0; k < int(n); k++ {
		// Invariant: j.cursor[id] is where the next unjoined bank of id starts in its payload.
		id := le.Uint32(hp[hl+4+4*k:])
		p, at := j.frags[id], j.cursor[id]
		field := fmt.Sprintf("fragment of source %#x", id)
		if at >= len(p) {
			return dst, schemas.Errorf(formatJoin, field, int64(at), schemas.ErrInconsistent, "event %d: bank %d of the event (source %#x) is missing", eb.EventID(i), k, id)
		}
		b, used, err := DecodeBank(p[at:])
		if err != nil {
			return dst, schemas.WithOffset(err, int64(at))
		}
		if b.Key() != id {
			return dst, schemas.Errorf(formatJoin, field, int64(at), schemas.ErrInconsistent, "holds a bank of type %d source %d (source id %#x)", b.Type, b.SourceID, b.Key())
		}
		j.body = append(j.body, p[at:at+used]...)
		j.cursor[id] = at + used
	}
	for id, p := range j.frags {
		if id != HeaderSource && j.cursor[id] < len(p) {
			return dst, schemas.Errorf(formatJoin, fmt.Sprintf("fragment of source %#x", id), int64(j.cursor[id]), schemas.ErrInconsistent, "event %d: %d bytes of banks the header fragment does not list", eb.EventID(i), len(p)-j.cursor[id])
		}
	}
	if int(h.Size) != hl+len(j.body) {
		return dst, schemas.Errorf(formatJoin, "header fragment", 0, schemas.ErrInconsistent, "event %d: the header gives a %d-byte record, the banks make %d", eb.EventID(i), h.Size, hl+len(j.body))
	}
	if v != nil && h.TriggerMask == [4]uint32{} {
		h.TriggerMask = TriggerMaskOf(*v)
	}
	return AppendRecord(dst, h, j.body, j.Level)
}
