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
	sources []uint32       // bank sources, ascending (HeaderSource excluded)
	index   map[uint32]int // source id -> position in sources
	banks   []Bank
	at      []int // body offset of banks[i]
	count   []int // per source: banks in the current event
	first   []int // per source: body offset of its first bank
	end     []int // per source: body offset after its last bank, or -1 once its banks are not contiguous
	spans   [][2]int
	buf     []byte
}

// NewSplitter returns a Splitter for the given source set (as ScanSources
// returns; HeaderSource is always included whether listed or not). Ids of
// 2^24 and above other than HeaderSource are refused.
func NewSplitter(sources []uint32) (*Splitter, error) {
	s := &Splitter{index: map[uint32]int{}}
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
		s.index[id] = i
	}
	n := len(s.sources)
	s.count, s.first, s.end = make([]int, n), make([]int, n), make([]int, n)
	s.spans = make([][2]int, n)
	return s, nil
}

// Sources returns the full source set, HeaderSource last: the sources the
// builder must expect.
func (s *Splitter) Sources() []uint32 { return append(slices.Clone(s.sources), HeaderSource) }

// Split appends to dst the fragments of one MDF event, header h and body of
// raw banks, that is the index-th of its stream: the header fragment, then
// one fragment per configured source in ascending source id, all with the
// same event id (see the mapping above) and their CRC-32C computed.
// Payloads alias body or the Splitter's buffers and stay valid until the
// next Split. Errors: *schemas.DecodeError for a malformed bank or ODIN
// bank (offsets from the start of body), or an error wrapping
// ErrUnknownSource.
func (s *Splitter) Split(dst []schemas.Fragment, h *Header, body []byte, index uint64) ([]schemas.Fragment, error) {
	var err error
	if s.banks, err = AppendBanks(s.banks[:0], body); err != nil {
		return dst, err
	}
	for i := range s.count {
		s.count[i], s.end[i] = 0, 0
	}
	eventID, haveODIN := index, false
	s.at = s.at[:0]
	at := 0
	for bi := range s.banks {
		// Invariant: at is the body offset of bank bi (banks are contiguous).
		b := &s.banks[bi]
		s.at = append(s.at, at)
		si, ok := s.index[b.Key()]
		if !ok {
			return dst, fmt.Errorf("%w: event %d: bank %d (type %d, source %d: source id %#x) at body offset %d", ErrUnknownSource, index, bi, b.Type, b.SourceID, b.Key(), at)
		}
		switch {
		case s.count[si] == 0:
			s.first[si] = at
			s.end[si] = at + b.PaddedLen()
		case s.end[si] == at:
			s.end[si] = at + b.PaddedLen()
		default:
			s.end[si] = -1
		}
		s.count[si]++
		if b.Type == BankTypeODIN && !haveODIN {
			o, err := DecodeODIN(b.Version, b.Data)
			if err != nil {
				return dst, schemas.WithOffset(err, int64(at+BankHeaderSize))
			}
			eventID, haveODIN = o.EventNumber, true
		}
		at += b.PaddedLen()
	}

	// Build the header fragment and the concatenations of scattered banks
	// in s.buf, remembering spans, then slice s.buf once it stops growing.
	hh := *h
	hh.Size, hh.Checksum, hh.Compression = uint32(h.Len()+len(body)), 0, 0
	s.buf = appendHeader(s.buf[:0], &hh)
	s.buf = binary.LittleEndian.AppendUint32(s.buf, uint32(len(s.banks)))
	for bi := range s.banks {
		s.buf = binary.LittleEndian.AppendUint32(s.buf, s.banks[bi].Key())
	}
	headerLen := len(s.buf)
	for si := range s.sources {
		if s.count[si] == 0 || s.end[si] >= 0 {
			continue
		}
		start := len(s.buf)
		for bi := range s.banks {
			if b := &s.banks[bi]; b.Key() == s.sources[si] {
				s.buf = append(s.buf, body[s.at[bi]:s.at[bi]+b.PaddedLen()]...)
			}
		}
		s.spans[si] = [2]int{start, len(s.buf)}
	}

	dst = append(dst, fragment(HeaderSource, eventID, s.buf[:headerLen]))
	for si, id := range s.sources {
		var p []byte
		switch {
		case s.count[si] == 0:
			f := fragment(id, eventID, nil)
			f.Flags = schemas.FlagEmpty
			dst = append(dst, f)
			continue
		case s.end[si] >= 0:
			p = body[s.first[si]:s.end[si]]
		default:
			p = s.buf[s.spans[si][0]:s.spans[si][1]]
		}
		dst = append(dst, fragment(id, eventID, p))
	}
	return dst, nil
}

func fragment(source uint32, eventID uint64, p []byte) schemas.Fragment {
	return schemas.Fragment{SourceID: source, EventID: eventID, CRC: schemas.Checksum(p), Payload: p[:len(p):len(p)]}
}
