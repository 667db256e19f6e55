package atlas

import (
	"errors"
	"fmt"

	"github.com/sluice-daq/sluice/schemas"
)

// fullFixedWords counts the v4.0 full-event words after the status words
// that do not depend on any count: checksum type, the nine event words and
// the four list counts; fullFixedWordsV50 those of v5.0, whose global_id
// takes two words and which adds the compression type and the readable
// payload size.
const (
	fullFixedWords    = 1 + 9 + 4
	fullFixedWordsV50 = fullFixedWords + 3
)

// FullEvent is a decoded v4.0 or v5.0 full event: the event builder's
// header and the event's ROB fragments. Slices are word values,
// independent of the byte order the event had.
type FullEvent struct {
	Version      uint32 // VersionV40 or VersionV50: the header's layout
	SourceID     uint32
	Status       []uint32
	ChecksumType ChecksumType
	Checksum     uint32 // as stored; 0 when ChecksumType is none
	ChecksumOK   bool   // the event's own checksum matches (true for none)

	BCTimeSeconds     uint32 // bunch crossing time, Unix seconds
	BCTimeNanoseconds uint32
	GlobalID          uint64 // event builder's event id, unique in a run (32 bits in v4.0)
	RunType           uint32
	RunNumber         uint32
	LumiBlock         uint32
	L1ID              uint32 // extended L1ID
	BCID              uint32
	L1TriggerType     uint32
	// CompressionType is v5.0's (0: the payload is not compressed, the
	// only kind read); ReadablePayloadWords its payload size once
	// uncompressed, in words, as stored (written as the payload's size).
	CompressionType      uint32
	ReadablePayloadWords uint32
	L1Info               []uint32 // level-1 trigger info words
	L2Info               []uint32 // level-2 trigger info words
	EFInfo               []uint32 // event filter info words (v5.0: HLT info)
	StreamTags           []uint32 // encoded stream tags

	ROBs []ROB
}

// v50 says whether e has the v5.0 header layout.
func (e *FullEvent) v50() bool { return e.Version>>16 == VersionV50>>16 }

// headerWords is the event's header size in words.
func (e *FullEvent) headerWords() int {
	fixed := fullFixedWords
	if e.v50() {
		fixed = fullFixedWordsV50
	}
	return 6 + len(e.Status) + fixed + len(e.L1Info) + len(e.L2Info) + len(e.EFInfo) + len(e.StreamTags)
}

// AppendFullEvent appends e as a full event of its Version's layout (v4.0
// or v5.0) in byte order o to dst, with every checksum computed (the stored
// Checksum fields are ignored) and, in v5.0, the readable payload size set
// to the payload's (e.ReadablePayloadWords is ignored). Errors: an unknown
// checksum type, a v5.0 compression type other than 0 (sluice writes no
// compressed payload), a global_id over 32 bits in v4.0.
func AppendFullEvent(dst []byte, e *FullEvent, o ByteOrder) ([]byte, error) {
	hs := e.headerWords()
	w := make([]uint32, 0, hs+1)
	w = append(w, MarkerFullEvent, 0, uint32(hs), e.Version, e.SourceID, uint32(len(e.Status)))
	w = append(w, e.Status...)
	readable := -1 // index of v5.0's readable payload size
	if e.v50() {
		if e.CompressionType != 0 {
			return dst, fmt.Errorf("atlas: full event %d: compression type %d (sluice writes uncompressed payloads)", e.GlobalID, e.CompressionType)
		}
		w = append(w, uint32(e.ChecksumType), e.BCTimeSeconds, e.BCTimeNanoseconds, uint32(e.GlobalID), uint32(e.GlobalID>>32),
			e.RunType, e.RunNumber, e.LumiBlock, e.L1ID, e.BCID, e.L1TriggerType, e.CompressionType, 0)
		readable = len(w) - 1
	} else {
		if e.GlobalID > 0xFFFFFFFF {
			return dst, fmt.Errorf("atlas: full event %d: a v4.0 global_id has 32 bits", e.GlobalID)
		}
		w = append(w, uint32(e.ChecksumType), e.BCTimeSeconds, e.BCTimeNanoseconds, uint32(e.GlobalID), e.RunType,
			e.RunNumber, e.LumiBlock, e.L1ID, e.BCID, e.L1TriggerType)
	}
	for _, l := range [][]uint32{e.L1Info, e.L2Info, e.EFInfo, e.StreamTags} {
		w = append(append(w, uint32(len(l))), l...)
	}
	for i := range e.ROBs {
		var err error
		if w, err = e.ROBs[i].AppendWords(w); err != nil {
			return dst, err
		}
	}
	if readable >= 0 {
		w[readable] = uint32(len(w) - hs)
	}
	sum, ok := Checksum(e.ChecksumType, w[hs:])
	if !ok {
		return dst, fmt.Errorf("atlas: full event %d: unknown checksum type %d", e.GlobalID, e.ChecksumType)
	}
	if e.ChecksumType != ChecksumNone {
		w = append(w, sum)
	}
	w[1] = uint32(len(w))
	return appendWords(dst, o, w...), nil
}

// DecodeFullEvent decodes the v4.0 or v5.0 full event at the start of b, in
// whichever byte order its marker shows, with all its ROB fragments, and
// returns it with the bytes it occupies and the byte order. Checksums of
// the event and of every ROB are verified: on a mismatch the whole event is
// still returned, with ChecksumOK false where it failed, together with a
// *schemas.DecodeError wrapping ErrCRCMismatch for the first failing ROB
// (or else the event's own checksum), so a
// caller may keep the event and flag it. Other errors: *schemas.DecodeError
// wrapping ErrTruncated, ErrBadMagic, ErrBadVersion, ErrUnsupported (a
// v5.0 compressed payload, an unknown checksum type), ErrSizeOverflow (a header size, count or ROB size
// that reaches past its enclosing structure), ErrInconsistent or
// ErrBadHeader.
func DecodeFullEvent(b []byte) (FullEvent, int, ByteOrder, error) {
	o, err := order(b, MarkerFullEvent, fmtFull)
	if err != nil {
		return FullEvent{}, 0, nil, err
	}
	size, err := fragmentSize(b, o, fmtFull)
	if err != nil {
		return FullEvent{}, 0, nil, err
	}
	e, err := decodeFullEvent(image(b[:4*size], o))
	return e, 4 * size, o, err
}

func decodeFullEvent(w []uint32, le []byte) (FullEvent, error) {
	at := func(i int) int64 { return 4 * int64(i) }
	g, err := decodeGeneric(w, le, 0, fmtFull, fullFixedWords)
	if err != nil {
		return FullEvent{}, err
	}
	e := FullEvent{Version: g.version, SourceID: g.source, Status: g.status, ChecksumType: g.checksumType, Checksum: g.checksum}
	p := 6 + len(g.status) + 1 // first word after the checksum type
	hs := int(g.hsize)
	var gidLow, gidHigh uint32
	fields := []*uint32{&e.BCTimeSeconds, &e.BCTimeNanoseconds, &gidLow, &e.RunType, &e.RunNumber,
		&e.LumiBlock, &e.L1ID, &e.BCID, &e.L1TriggerType}
	if e.v50() {
		fields = []*uint32{&e.BCTimeSeconds, &e.BCTimeNanoseconds, &gidLow, &gidHigh, &e.RunType, &e.RunNumber,
			&e.LumiBlock, &e.L1ID, &e.BCID, &e.L1TriggerType, &e.CompressionType, &e.ReadablePayloadWords}
	}
	for _, f := range fields {
		*f = w[p]
		p++
	}
	e.GlobalID = uint64(gidHigh)<<32 | uint64(gidLow)
	if e.CompressionType != 0 {
		return e, schemas.Errorf(fmtFull, "compression_type", at(p-2), schemas.ErrUnsupported, "global_id %d: compression type %d: only uncompressed (0) payloads are read", e.GlobalID, e.CompressionType)
	}
	for i, l := range []*[]uint32{&e.L1Info, &e.L2Info, &e.EFInfo, &e.StreamTags} {
		// Invariant: p < hs, since the fixed words fit (checked by
		// decodeGeneric) and each list ends before the next count.
		n := uint64(w[p])
		if uint64(p)+1+n+uint64(3-i) > uint64(hs) {
			return e, schemas.Errorf(fmtFull, listNames[i], at(p), schemas.ErrSizeOverflow, "%d words do not fit the header of %d words", n, hs)
		}
		*l = w[p+1 : p+1+int(n) : p+1+int(n)]
		p += 1 + int(n)
	}
	if p != hs {
		return e, schemas.Errorf(fmtFull, "header_size", at(2), schemas.ErrInconsistent, "header fields end at word %d, header_size is %d", p, hs)
	}
	// The ROBs fill the payload exactly.
	var firstBad error
	for q := 0; q < len(g.payload); {
		off := at(g.payloadAt + q)
		rest := g.payload[q:]
		if rest[0] != MarkerROB {
			return e, schemas.Errorf(fmtROB, "marker", off, schemas.ErrBadMagic, "ROB %d: want 0x%08x, have 0x%08x", len(e.ROBs), MarkerROB, rest[0])
		}
		if len(rest) < 2 || uint64(rest[1]) > uint64(len(rest)) {
			return e, schemas.Errorf(fmtROB, "fragment_size", off+4, schemas.ErrSizeOverflow, "ROB %d reaches past the event's payload (%d words left)", len(e.ROBs), len(rest))
		}
		at := g.payloadAt + q
		r, err := decodeROB(rest[:rest[1]], le[4*at:4*(at+int(rest[1]))], off)
		if err != nil && !errors.Is(err, schemas.ErrCRCMismatch) {
			return e, err
		}
		if err != nil && firstBad == nil {
			firstBad = err
		}
		e.ROBs = append(e.ROBs, r)
		q += int(rest[1])
	}
	err = g.verify(0, fmtFull)
	e.ChecksumOK = err == nil
	if firstBad != nil {
		err = firstBad // the ROB's, earlier in the buffer and more specific
	}
	return e, err
}

var listNames = [4]string{"n_l1_info", "n_l2_info", "n_ef_info", "n_stream_tag"}
