package storage

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/sluice-daq/sluice/schemas"
)

// ValueVersion is the event value encoding this build writes and reads
// (byte 0 of every event value; see the layout in doc.go).
const ValueVersion = 1

// Stream is one of the store's event streams (accepted, deferred, the
// tombstones of voided events: Void, and the shadow plugins' differing
// events: Shadow); its value is the first byte of every key of the stream.
type Stream uint8

const (
	// Accepted holds events a trigger stage accepted, waiting to leave the
	// node for offline storage.
	Accepted Stream = 1
	// Deferred holds events written unprocessed, to be triggered by replay.
	Deferred Stream = 2
	// Shadow holds copies of events on which a trigger stage's shadow
	// plugin decided otherwise than its production plugin (the shadow's
	// verdict stored, production's decision in the reason text), within
	// the stage's shadow store_bytes, for inspection and export. Nothing
	// replays it, and an event in it is also in accepted or deferred, or
	// was rejected, as production decided. Its events have no provenance
	// records of their own (Why describes the production event).
	Shadow Stream = 4
)

// metaPrefix is the first byte of the store's own records (schema, ledger,
// line names);
// it sorts before every stream.
const metaPrefix byte = 0

var (
	metaSchemaKey = []byte{metaPrefix, 's', 'c', 'h', 'e', 'm', 'a'}
	metaLedgerKey = []byte{metaPrefix, 'l', 'e', 'd', 'g', 'e', 'r'}
)

// Streams lists the streams in key order.
var Streams = []Stream{Accepted, Deferred}

func (s Stream) String() string {
	switch s {
	case Accepted:
		return "accepted"
	case Deferred:
		return "deferred"
	case Void:
		return "void"
	case Shadow:
		return "shadow"
	}
	return fmt.Sprintf("stream(%d)", uint8(s))
}

func (s Stream) valid() bool { return s == Accepted || s == Deferred || s == Void || s == Shadow }

// ParseStream returns the stream named "accepted", "deferred", "void" or
// "shadow".
func ParseStream(name string) (Stream, error) {
	for _, s := range append(Streams, Void, Shadow) {
		if s.String() == name {
			return s, nil
		}
	}
	return 0, fmt.Errorf("unknown stream %q (want accepted, deferred, void or shadow)", name)
}

// KeySize is the length of an event key: stream (1 byte), run (4 bytes,
// big-endian), event id (8 bytes, big-endian). Big-endian fixed-width
// fields make badger's byte order the (run, event id) order.
const KeySize = 13

// Key identifies one stored event within a stream.
type Key struct {
	Run     uint32
	EventID uint64
}

func appendKey(dst []byte, s Stream, k Key) []byte {
	dst = append(dst, byte(s))
	dst = binary.BigEndian.AppendUint32(dst, k.Run)
	return binary.BigEndian.AppendUint64(dst, k.EventID)
}

// parseKey splits an event key; ok is false for keys of another shape.
func parseKey(b []byte) (Stream, Key, bool) {
	if len(b) != KeySize || !Stream(b[0]).valid() {
		return 0, Key{}, false
	}
	return Stream(b[0]), Key{Run: binary.BigEndian.Uint32(b[1:5]), EventID: binary.BigEndian.Uint64(b[5:13])}, true
}

// valueHeaderSize is the fixed part of an event value (doc.go).
const valueHeaderSize = 56

// record is a decoded event value. Its slices view the decoded buffer.
type record struct {
	decision  schemas.Decision
	run       uint32
	eventID   uint64
	timestamp uint64
	status    uint32
	nFrags    uint32
	lines     uint64
	stage     []byte
	reason    []byte
	missing   []byte // n × uint32 little-endian
	corrupt   []byte // n × uint32 little-endian
	groups    []groupView
}

type groupView struct {
	sizes   []byte // n × uint32 little-endian, one per source of the group
	payload []byte
}

// encodedSize is the exact length appendValue produces for row i of eb.
func encodedSize(eb *schemas.EventBatch, i int, v *schemas.Verdict) int {
	n := valueHeaderSize + len(v.Stage) + len(v.Reason.Text) +
		4*(len(eb.MissingSources(i))+len(eb.CorruptSources(i)))
	for g := range eb.Groups {
		n += 12 + 4*len(eb.GroupSizes(g, i)) + len(eb.GroupPayload(g, i))
	}
	return n
}

// appendValue encodes row i of eb with the trigger's verdict v (layout in
// doc.go): its decision, lines, stage and reason text. Stage and reason
// longer than 4 GiB are not representable and are rejected by the caller's
// validation.
func appendValue(dst []byte, eb *schemas.EventBatch, i int, v *schemas.Verdict, status schemas.EventStatus) []byte {
	dst = appendValueHead(dst, eb, i, v, status)
	for g := range eb.Groups {
		dst = appendGroupHead(dst, eb, g, i)
		dst = append(dst, eb.GroupPayload(g, i)...)
	}
	return dst
}

// appendValueHead encodes the part of row i's value before its groups:
// the header, stage, reason, missing and corrupt sources.
func appendValueHead(dst []byte, eb *schemas.EventBatch, i int, v *schemas.Verdict, status schemas.EventStatus) []byte {
	missing, corrupt := eb.MissingSources(i), eb.CorruptSources(i)
	var h [valueHeaderSize]byte
	h[0] = ValueVersion
	h[1] = byte(v.Decision)
	binary.LittleEndian.PutUint16(h[2:], uint16(len(eb.Groups)))
	binary.LittleEndian.PutUint32(h[4:], eb.Run(i))
	binary.LittleEndian.PutUint64(h[8:], eb.EventID(i))
	binary.LittleEndian.PutUint64(h[16:], eb.Timestamp(i))
	binary.LittleEndian.PutUint32(h[24:], uint32(status))
	binary.LittleEndian.PutUint32(h[28:], uint32(eb.NumFragments(i)))
	binary.LittleEndian.PutUint64(h[32:], v.Lines)
	binary.LittleEndian.PutUint32(h[40:], uint32(len(v.Stage)))
	binary.LittleEndian.PutUint32(h[44:], uint32(len(v.Reason.Text)))
	binary.LittleEndian.PutUint32(h[48:], uint32(len(missing)))
	binary.LittleEndian.PutUint32(h[52:], uint32(len(corrupt)))
	dst = append(dst, h[:]...)
	dst = append(dst, v.Stage...)
	dst = append(dst, v.Reason.Text...)
	for _, id := range missing {
		dst = binary.LittleEndian.AppendUint32(dst, id)
	}
	for _, id := range corrupt {
		dst = binary.LittleEndian.AppendUint32(dst, id)
	}
	return dst
}

// appendGroupHead encodes group g's part of row i's value before its
// payload: n_sizes, payload_len and the sizes.
func appendGroupHead(dst []byte, eb *schemas.EventBatch, g, i int) []byte {
	sizes, payload := eb.GroupSizes(g, i), eb.GroupPayload(g, i)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(sizes)))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(len(payload)))
	for _, n := range sizes {
		dst = binary.LittleEndian.AppendUint32(dst, n)
	}
	return dst
}

// decodeValue parses an event value into r, reusing r's group slice. Its
// slices view v. Errors are *schemas.DecodeError with the byte offset in v;
// an unknown version byte yields schemas.ErrBadVersion naming the version.
func decodeValue(v []byte, r *record) error {
	const format = "store value"
	if len(v) < 1 {
		return schemas.Errorf(format, "version", 0, schemas.ErrTruncated, "empty value")
	}
	if v[0] != ValueVersion {
		return schemas.Errorf(format, "version", 0, schemas.ErrBadVersion,
			"value encoding version %d, this build reads version %d", v[0], ValueVersion)
	}
	if len(v) < valueHeaderSize {
		return schemas.Errorf(format, "header", 0, schemas.ErrTruncated, "%d bytes, header needs %d", len(v), valueHeaderSize)
	}
	r.decision = schemas.Decision(v[1])
	if r.decision > schemas.DecisionDefer {
		return schemas.Errorf(format, "decision", 1, schemas.ErrBadHeader, "decision %d is not none/accept/reject/defer", v[1])
	}
	nGroups := int(binary.LittleEndian.Uint16(v[2:]))
	r.run = binary.LittleEndian.Uint32(v[4:])
	r.eventID = binary.LittleEndian.Uint64(v[8:])
	r.timestamp = binary.LittleEndian.Uint64(v[16:])
	r.status = binary.LittleEndian.Uint32(v[24:])
	r.nFrags = binary.LittleEndian.Uint32(v[28:])
	r.lines = binary.LittleEndian.Uint64(v[32:])
	off := uint64(valueHeaderSize)
	// take returns the next n bytes; every length is checked against what
	// is left before slicing, in uint64 so that no sum can overflow.
	take := func(field string, n uint64) ([]byte, error) {
		if n > uint64(len(v))-off {
			return nil, schemas.Errorf(format, field, int64(off), schemas.ErrTruncated,
				"needs %d bytes, %d left", n, uint64(len(v))-off)
		}
		b := v[off : off+n : off+n]
		off += n
		return b, nil
	}
	var err error
	if r.stage, err = take("stage", uint64(binary.LittleEndian.Uint32(v[40:]))); err != nil {
		return err
	}
	if r.reason, err = take("reason", uint64(binary.LittleEndian.Uint32(v[44:]))); err != nil {
		return err
	}
	if r.missing, err = take("missing_sources", 4*uint64(binary.LittleEndian.Uint32(v[48:]))); err != nil {
		return err
	}
	if r.corrupt, err = take("corrupt_sources", 4*uint64(binary.LittleEndian.Uint32(v[52:]))); err != nil {
		return err
	}
	r.groups = r.groups[:0]
	for g := 0; g < nGroups; g++ {
		field := fmt.Sprintf("group[%d]", g)
		gh, err := take(field, 12)
		if err != nil {
			return err
		}
		var gv groupView
		if gv.sizes, err = take(field+".sizes", 4*uint64(binary.LittleEndian.Uint32(gh))); err != nil {
			return err
		}
		if gv.payload, err = take(field+".payload", binary.LittleEndian.Uint64(gh[4:])); err != nil {
			return err
		}
		r.groups = append(r.groups, gv)
	}
	if off != uint64(len(v)) {
		return schemas.Errorf(format, "end", int64(off), schemas.ErrInconsistent, "%d bytes after the last group", uint64(len(v))-off)
	}
	return nil
}

// checkKey verifies that a decoded value belongs to the key it was stored
// under, so a misplaced or corrupt value is not replayed as another event.
func (r *record) checkKey(k Key) error {
	if r.run != k.Run || r.eventID != k.EventID {
		return schemas.Errorf("store value", "header", 4, schemas.ErrInconsistent,
			"value holds run %d event %d, key says run %d event %d", r.run, r.eventID, k.Run, k.EventID)
	}
	return nil
}

// verdict returns the stored verdict (copies the strings); the reason's
// kind is not stored.
func (r *record) verdict() schemas.Verdict {
	return schemas.Verdict{Decision: r.decision, Lines: r.lines, Stage: string(r.stage), Reason: schemas.Reason{Text: string(r.reason)}}
}

// validateVerdict rejects verdicts the value layout cannot hold.
func validateVerdict(v *schemas.Verdict) error {
	if v.Decision > schemas.DecisionDefer {
		return fmt.Errorf("decision %d is not none/accept/reject/defer", v.Decision)
	}
	if len(v.Stage) > math.MaxUint32 || len(v.Reason.Text) > math.MaxUint32 {
		return fmt.Errorf("stage or reason longer than 4 GiB")
	}
	return nil
}
