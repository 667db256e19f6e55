package lhcb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/sluice-daq/sluice/schemas"
)

// Mapping an MDF event onto sluice fragments.
//
// Source ids. In LHCb data a bank's source id repeats across bank types (the
// 2018 sample has 590 distinct source ids but 1238 (type, source id) pairs),
// so a readout source is the pair: its sluice source id is
// SourceID(type, source) = type<<16 | source id, which stays below 2^24.
//
// Fragments. As a real readout board does, every source of the configured
// set sends a fragment for every event: empty (schemas.FlagEmpty) when the
// event has no bank of it, otherwise ALL its banks as they stand in the MDF
// body (8-byte bank header, payload, padding to 4 bytes), in their order in
// the event. The bank headers stay in the payload so that the joiner can
// restore type, version and source id.
//
// The header fragment. One more source, HeaderSource, sends the MDF header
// (run, orbit, bunch, trigger mask and the other header fields) and the
// order of the banks in the event, so that the joiner restores the header
// and the original bank order exactly:
//
//	| off  | size | field                                                     |
//	|------|------|-----------------------------------------------------------|
//	|    0 |    H | the MDF header of the event's record (H = HeaderLen of    |
//	|      |      | its version), normalized to the uncompressed event: size  |
//	|      |      | = H + body bytes, checksum 0, compression 0               |
//	|    H |    4 | n: banks in the event (u32)                               |
//	|  H+4 |   4n | sluice source id of bank i, i in body order (u32 each)    |
//
// Event id. The ODIN bank's event number (64 bits); the event's index in the
// stream only when it has no ODIN bank.

// HeaderSource is the sluice source id of the header fragment: above every
// SourceID(type, source) (those are below 2^24).
const HeaderSource uint32 = 1 << 24

const formatSplit = "lhcb-split"

// ErrUnknownSource: an event holds a bank of a source that is not in the
// configured source set (configure the set with ScanSources).
var ErrUnknownSource = errors.New("lhcb: bank of a source outside the configured set")

// SourceID returns the sluice source id of the readout source that sends
// banks of this type and LHCb source id: bankType<<16 | sourceID.
func SourceID(bankType uint8, sourceID uint16) uint32 {
	return uint32(bankType)<<16 | uint32(sourceID)
}

// SplitSourceID is the inverse of SourceID; ok is false for HeaderSource
// and ids of 2^24 and above.
func SplitSourceID(id uint32) (bankType uint8, sourceID uint16, ok bool) {
	return uint8(id >> 16), uint16(id), id < 1<<24
}

// ScanSources reads every event of r (see ForEachEvent) and returns the
// source set that splitting it needs: the SourceID of every (type, source
// id) seen, then HeaderSource, ascending. Pass it to NewSplitter and to the
// builder's expected sources.
func ScanSources(r io.Reader) ([]uint32, error) {
	seen := map[uint32]bool{}
	var banks []Bank
	err := ForEachEvent(r, func(ev *Event) error {
		var err error
		if banks, err = AppendBanks(banks[:0], ev.Body); err != nil {
			return schemas.WithOffset(err, ev.Offset+int64(ev.Header.Len()))
		}
		for i := range banks {
			seen[banks[i].Key()] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]uint32, 0, len(seen)+1)
	for id := range seen {
		out = append(out, id)
	}
	slices.Sort(out)
	return append(out, HeaderSource), nil
}

// Splitter turns MDF events into one fragment per configured source. It
// reuses its buffers: not safe for concurrent use.
type Splitter struct {
	// SkipCRC leaves Fragment.CRC at 0, for callers that compute the CRCs
	// when they encode the fragments anyway (schemas.AppendMFP,
	// schemas.AppendFragment with computeCRC). Fragments handed to the
	// builder directly need their CRC: leave it false.
	SkipCRC bool

	sources []uint32 // bank sources, ascending (HeaderSource excluded)
	// table[type][source id] is 1 + the position of SourceID(type, source
	// id) in sources, 0 when not configured; nil for an unused type. A
	// direct index, as a map lookup per bank costs more than the rest of
	// the split.
	table [256][]int32
	st    []srcState // per source, state in the current event
	epoch uint32     // current event's stamp in srcState.epoch
	buf   []byte     // header fragment, then concatenations of scattered banks
}

// srcState is what Split knows of a source in the current event.
type srcState struct {
	epoch        uint32 // == Splitter.epoch when the source has banks in this event
	first, end   int32  // body offsets of its first bank and after its last; end = -1 when not contiguous
	span0, span1 int32  // its concatenated banks in buf when not contiguous
}

// NewSplitter returns a Splitter for the given source set (as ScanSources
// returns; HeaderSource is always included whether listed or not). Ids of
// 2^24 and above other than HeaderSource are refused.
func NewSplitter(sources []uint32) (*Splitter, error) {
	s := &Splitter{}
	for _, id := range sources {
		if id == HeaderSource {
			continue
		}
		if _, _, ok := SplitSourceID(id); !ok {
			return nil, fmt.Errorf("lhcb: source id %#x is neither a (type, source) pair nor HeaderSource", id)
		}
		s.sources = append(s.sources, id)
	}
	slices.Sort(s.sources)
	s.sources = slices.Compact(s.sources)
	for i, id := range s.sources {
		typ, src, _ := SplitSourceID(id)
		if s.table[typ] == nil {
			s.table[typ] = make([]int32, 1<<16)
		}
		s.table[typ][src] = int32(i) + 1
	}
	s.st = make([]srcState, len(s.sources))
	return s, nil
}

// Sources returns the full source set, HeaderSource last: the sources the
// builder must expect.
func (s *Splitter) Sources() []uint32 { return append(slices.Clone(s.sources), HeaderSource) }

// Split appends to dst the fragments of one MDF event, header h and body of
// raw banks, that is the index-th of its stream: the header fragment, then
// one fragment per configured source in ascending source id, all with the
// same event id (see the mapping above) and their CRC-32C computed unless
// SkipCRC. Payloads alias body or the Splitter's buffers and stay valid
// until the next Split. Errors: *schemas.DecodeError for a malformed bank
// or ODIN bank (offsets from the start of body), or an error wrapping
// ErrUnknownSource.
func (s *Splitter) Split(dst []schemas.Fragment, h *Header, body []byte, index uint64) ([]schemas.Fragment, error) {
	if len(body) > MaxRecordSize {
		return dst, schemas.Errorf(formatSplit, "body", 0, schemas.ErrSizeOverflow, "body of %d bytes exceeds %d", len(body), MaxRecordSize)
	}
	s.epoch++
	if s.epoch == 0 { // wrapped: forget every stamp
		clear(s.st)
		s.epoch = 1
	}
	le := binary.LittleEndian
	hh := *h
	hh.Size, hh.Checksum, hh.Compression = uint32(h.Len()+len(body)), 0, 0
	s.buf = appendHeader(s.buf[:0], &hh)
	countAt := len(s.buf)
	s.buf = append(s.buf, 0, 0, 0, 0)
	eventID, haveODIN, scattered, nbanks := index, false, false, 0
	for at := 0; at < len(body); {
		// Invariant: body[:at] is whole valid banks, each recorded in s.st
		// and listed in s.buf.
		rest := body[at:]
		n := 0
		if len(rest) >= BankHeaderSize {
			n = int(le.Uint16(rest[2:]))
		}
		padded := (n + 3) &^ 3
		if n < BankHeaderSize || le.Uint16(rest) != BankMagic || padded > len(rest) {
			_, _, err := DecodeBank(rest) // the exact error
			return dst, schemas.WithOffset(err, int64(at))
		}
		typ, src := rest[4], le.Uint16(rest[6:])
		var si int32
		if t := s.table[typ]; t != nil {
			si = t[src] - 1
		} else {
			si = -1
		}
		if si < 0 {
			return dst, fmt.Errorf("%w: event %d: bank %d (type %d, source %d: source id %#x) at body offset %d", ErrUnknownSource, index, nbanks, typ, src, SourceID(typ, src), at)
		}
		st := &s.st[si]
		switch {
		case st.epoch != s.epoch:
			*st = srcState{epoch: s.epoch, first: int32(at), end: int32(at + padded)}
		case st.end == int32(at):
			st.end = int32(at + padded)
		default:
			st.end, scattered = -1, true
		}
		if typ == BankTypeODIN && !haveODIN {
			o, err := DecodeODIN(rest[5], rest[BankHeaderSize:n])
			if err != nil {
				return dst, schemas.WithOffset(err, int64(at+BankHeaderSize))
			}
			eventID, haveODIN = o.EventNumber, true
		}
		s.buf = le.AppendUint32(s.buf, SourceID(typ, src))
		nbanks++
		at += padded
	}
	le.PutUint32(s.buf[countAt:], uint32(nbanks))
	headerLen := len(s.buf)
	if scattered {
		s.gather(body)
	}

	base := len(dst)
	dst = slices.Grow(dst, 1+len(s.sources))[:base+1+len(s.sources)]
	dst[base] = schemas.Fragment{SourceID: HeaderSource, EventID: eventID, Payload: s.buf[:headerLen:headerLen]}
	out := dst[base+1:]
	for si := range out {
		// Every configured source gets a fragment, empty when it has no
		// bank. Fields are stored one by one: building a Fragment value
		// and copying it costs twice as much in this loop.
		f, st := &out[si], &s.st[si]
		f.SourceID, f.EventID, f.CRC = s.sources[si], eventID, 0
		switch {
		case st.epoch != s.epoch:
			f.Flags, f.Payload = schemas.FlagEmpty, nil
		case st.end >= 0:
			f.Flags, f.Payload = 0, body[st.first:st.end:st.end]
		default:
			f.Flags, f.Payload = 0, s.buf[st.span0:st.span1:st.span1]
		}
	}
	if !s.SkipCRC {
		for i := range dst[base:] {
			dst[base+i].CRC = schemas.Checksum(dst[base+i].Payload)
		}
	}
	return dst, nil
}

// gather concatenates, in s.buf, the banks of every source whose banks are
// not adjacent in body (already validated by Split), in body order.
func (s *Splitter) gather(body []byte) {
	le := binary.LittleEndian
	for si := range s.st {
		st := &s.st[si]
		if st.epoch != s.epoch || st.end >= 0 {
			continue
		}
		st.span0 = int32(len(s.buf))
		for at := int(st.first); at < len(body); {
			n := (int(le.Uint16(body[at+2:])) + 3) &^ 3
			if SourceID(body[at+4], le.Uint16(body[at+6:])) == s.sources[si] {
				s.buf = append(s.buf, body[at:at+n]...)
			}
			at += n
		}
		st.span1 = int32(len(s.buf))
	}
}
