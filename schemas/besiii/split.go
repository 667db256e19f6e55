package besiii

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
)

// Splitting and joining. SplitEvent sends one fragment per ROB (source id
// = the ROB's source id, payload = the ROB fragment's bytes) and one more,
// from HeaderSource, carrying what the ROBs do not: the file's start
// records, the event's data block number, the headers of the full event,
// its sub-detectors and ROS fragments, and which ROBs each ROS holds. Its
// payload, little-endian 32-bit words (layout 1):
//
//	| words | field                                                        |
//	|-------|--------------------------------------------------------------|
//	| 1     | layout = 1                                                   |
//	| 1     | H: words of the file's start records (0: the stream had none) |
//	| H     | FILE_START, FILE_NAME and RUN_PARAMS as in the file          |
//	| 1     | the event's data block number (its data separator's);        |
//	|       | NoSeparator: it had none (a bare eformat v3.0 stream)        |
//	| e     | the full event's header (e = its header size word)           |
//	| 1     | S: sub-detector fragments                                    |
//	| then S times: the sub-detector's header, 1 word R: its ROS          |
//	| fragments, then R times: the ROS's header, 1 word B: its ROBs, B    |
//	| words: their source ids in order                                    |
//
// The size words inside the headers are the original ones; Join computes
// them again from what it writes.

// HeaderSource is the sluice source id of the event header fragment: ROB
// source ids use the low 24 bits, so this one is never a ROB's.
const HeaderSource uint32 = 0xFFFFFFFF

// NoSeparator is the data block number of an event read from a bare
// stream of eformat v3.0 events (no BESIII file records, no data
// separator before it): Join writes it back without one. Block numbers of
// real files count from 1 per file and never reach it.
const NoSeparator uint32 = 0xFFFFFFFF

const (
	headerLayout = 1
	fmtJoin      = "besiii-join"
)

// SplitEvent turns a decoded full event into sluice fragments appended to
// dst: one per ROB in the event's order, then the header fragment (above)
// with head (the file's start records; nil when the stream had none) and
// block, the event's data block number. Event id = the global id;
// payload = the ROB fragment as decoded (aliasing the decoded buffer) or
// encoded; CRC = CRC-32C of each payload. A ROB whose generic status bits
// (low 16 bits of status word 0) are set is flagged
// schemas.FlagSourceError. Errors: two ROBs with one source id, or one
// with HeaderSource's (schemas.ErrInconsistent).
func SplitEvent(dst []schemas.Fragment, e *Fragment, head *Head, block uint32) ([]schemas.Fragment, error) {
	first := len(dst)
	id := uint64(e.GlobalID())
	seen := map[uint32]bool{}
	var err error
	e.ROBs(func(r *Fragment) bool {
		if seen[r.SourceID] || r.SourceID == HeaderSource {
			err = fmt.Errorf("besiii: event %d: ROB 0x%08x twice or with the header fragment's id: %w", id, r.SourceID, schemas.ErrInconsistent)
			return false
		}
		seen[r.SourceID] = true
		p := r.raw
		if p == nil {
			p = AppendFragment(nil, r)
		}
		var flags schemas.FragmentFlag
		if len(r.Status) > 0 && r.Status[0]&0xFFFF != 0 {
			flags |= schemas.FlagSourceError
		}
		dst = append(dst, schemas.Fragment{SourceID: r.SourceID, EventID: id, Flags: flags, CRC: schemas.Checksum(p), Payload: p})
		return true
	})
	if err != nil {
		return dst[:first], err
	}
	w := []uint32{headerLayout}
	if head != nil {
		w = append(append(w, uint32(len(head.Words))), head.Words...)
	} else {
		w = append(w, 0)
	}
	w = append(w, block)
	w = appendHeader(w, e)
	w = append(w, uint32(len(e.Children)))
	for i := range e.Children {
		sd := &e.Children[i]
		w = append(appendHeader(w, sd), uint32(len(sd.Children)))
		for j := range sd.Children {
			ros := &sd.Children[j]
			w = append(appendHeader(w, ros), uint32(len(ros.Children)))
			for k := range ros.Children {
				w = append(w, ros.Children[k].SourceID)
			}
		}
	}
	h := appendWords(nil, w)
	return append(dst, schemas.Fragment{SourceID: HeaderSource, EventID: id, CRC: schemas.Checksum(h), Payload: h}), nil
}

// appendHeader appends f's header words.
func appendHeader(w []uint32, f *Fragment) []uint32 {
	w = append(w, f.Marker, uint32(f.Words()), uint32(f.HeaderWords()), f.Version, f.SourceID, uint32(len(f.Status)))
	w = append(append(w, f.Status...), uint32(len(f.Specific)))
	return append(w, f.Specific...)
}

// headerReader reads the words of a header fragment.
type headerReader struct {
	w []uint32
	p int
}

func (h *headerReader) word(field string) (uint32, error) {
	if h.p >= len(h.w) {
		return 0, schemas.Errorf(fmtJoin, field, 4*int64(h.p), schemas.ErrTruncated, "the header fragment ends at word %d", len(h.w))
	}
	h.p++
	return h.w[h.p-1], nil
}

func (h *headerReader) take(n uint64, field string) ([]uint32, error) {
	if uint64(h.p)+n > uint64(len(h.w)) {
		return nil, schemas.Errorf(fmtJoin, field, 4*int64(h.p), schemas.ErrSizeOverflow, "%d words reach past the header fragment's %d", n, len(h.w))
	}
	h.p += int(n)
	return h.w[h.p-int(n) : h.p : h.p], nil
}

// fragment reads one fragment header with marker want.
func (h *headerReader) fragment(want uint32) (Fragment, error) {
	at := h.p
	name := levelName[want] + " header"
	if uint64(at)+7 > uint64(len(h.w)) {
		return Fragment{}, schemas.Errorf(fmtJoin, name, 4*int64(at), schemas.ErrTruncated, "the header fragment ends at word %d", len(h.w))
	}
	g := h.w[at:]
	if g[0] != want {
		return Fragment{}, schemas.Errorf(fmtJoin, name, 4*int64(at), schemas.ErrBadMagic, "want 0x%08x, have 0x%08x", want, g[0])
	}
	hs := uint64(g[2])
	if hs < 7 || uint64(at)+hs > uint64(len(h.w)) || 7+uint64(g[5]) > hs || 7+uint64(g[5])+uint64(g[6+g[5]]) != hs {
		return Fragment{}, schemas.Errorf(fmtJoin, name, 4*int64(at+2), schemas.ErrInconsistent, "header_size %d does not fit its counts or the fragment", hs)
	}
	ns := int(g[5])
	f := Fragment{Marker: want, Version: g[3], SourceID: g[4], Status: g[6 : 6+ns : 6+ns], Specific: g[7+ns : hs : hs]}
	h.p += int(hs)
	return f, nil
}

// parsed is a decoded header fragment.
type parsed struct {
	head  []uint32
	block uint32
	event Fragment // its tree down to the ROS level
	robs  [][]uint32
}

// parseHeader decodes a header fragment's payload p.
func parseHeader(p []byte) (parsed, error) {
	var out parsed
	if len(p)%4 != 0 {
		return out, schemas.Errorf(fmtJoin, "header fragment", int64(len(p)), schemas.ErrInconsistent, "%d bytes, not whole words", len(p))
	}
	h := &headerReader{w: make([]uint32, len(p)/4)}
	for i := range h.w {
		h.w[i] = binary.LittleEndian.Uint32(p[4*i:])
	}
	layout, err := h.word("layout")
	if err != nil {
		return out, err
	}
	if layout != headerLayout {
		return out, schemas.Errorf(fmtJoin, "layout", 0, schemas.ErrBadVersion, "want %d, have %d", headerLayout, layout)
	}
	n, err := h.word("head words")
	if err != nil {
		return out, err
	}
	if out.head, err = h.take(uint64(n), "head"); err != nil {
		return out, err
	}
	if out.block, err = h.word("data block number"); err != nil {
		return out, err
	}
	if out.event, err = h.fragment(MarkerFullEvent); err != nil {
		return out, err
	}
	nsd, err := h.word("sub-detectors")
	if err != nil {
		return out, err
	}
	for range nsd {
		sd, err := h.fragment(MarkerSubDetector)
		if err != nil {
			return out, err
		}
		nros, err := h.word("ROS count")
		if err != nil {
			return out, err
		}
		for range nros {
			ros, err := h.fragment(MarkerROS)
			if err != nil {
				return out, err
			}
			nrob, err := h.word("ROB count")
			if err != nil {
				return out, err
			}
			ids, err := h.take(uint64(nrob), "ROB source ids")
			if err != nil {
				return out, err
			}
			sd.Children = append(sd.Children, ros)
			out.robs = append(out.robs, ids)
		}
		out.event.Children = append(out.event.Children, sd)
	}
	if h.p != len(h.w) {
		return out, schemas.Errorf(fmtJoin, "header fragment", 4*int64(h.p), schemas.ErrInconsistent, "%d words left after the last ROS", len(h.w)-h.p)
	}
	return out, nil
}

// Joiner writes built events back as a data separator and a v3.0 full
// event each (format.EventJoiner).
type Joiner struct{}

var _ format.EventJoiner = Joiner{}

// Join appends to dst the data separator and full event of row i of a
// batch built from split BESIII events: the headers from the header
// fragment, each ROS's ROBs from their sources' fragments in the order
// the header fragment lists. A ROB that did not arrive (an incomplete
// event) is left out, its ROS and sub-detector sizes shrinking with it.
// Errors: format.ErrForeignEvents (no header fragment: the events were
// not split from BESIII data), the header fragment's decode errors
// (*schemas.DecodeError), ErrInconsistent (a header whose global id is
// not the row's event id, a fragment holding another source's ROB, a
// fragment of a source the header does not list).
func (Joiner) Join(dst []byte, eb *schemas.EventBatch, i int) ([]byte, error) {
	b, _, err := join(dst, eb, i)
	return b, err
}

// join is Join, also returning the decoded header fragment's file start
// records (for the exporter).
func join(dst []byte, eb *schemas.EventBatch, i int) ([]byte, []uint32, error) {
	frags, _ := eb.PresentFragments(i)
	id := eb.EventID(i)
	hp := frags[HeaderSource]
	if len(hp) == 0 {
		return dst, nil, format.NoHeaderFragment(Format, HeaderSource, eb, i)
	}
	h, err := parseHeader(hp)
	if err != nil {
		return dst, nil, err
	}
	if uint64(h.event.GlobalID()) != id {
		return dst, nil, schemas.Errorf(fmtJoin, "global id", 0, schemas.ErrInconsistent, "the header fragment holds global id %d in the row of event %d", h.event.GlobalID(), id)
	}
	listed := map[uint32]bool{HeaderSource: true}
	k := 0
	for s := range h.event.Children {
		sd := &h.event.Children[s]
		for r := range sd.Children {
			ros := &sd.Children[r]
			for _, src := range h.robs[k] {
				listed[src] = true
				p := frags[src]
				if len(p) == 0 {
					continue
				}
				rob, err := decodeROBBytes(p)
				if err != nil {
					return dst, nil, fmt.Errorf("besiii: event %d, ROB 0x%08x: %w", id, src, err)
				}
				if rob.SourceID != src {
					return dst, nil, schemas.Errorf(fmtJoin, fmt.Sprintf("fragment of source %#x", src), 16, schemas.ErrInconsistent, "event %d: holds ROB %#x", id, rob.SourceID)
				}
				ros.Children = append(ros.Children, rob)
			}
			k++
		}
	}
	for src := range frags {
		if !listed[src] {
			return dst, nil, schemas.Errorf(fmtJoin, fmt.Sprintf("fragment of source %#x", src), 0, schemas.ErrInconsistent, "event %d: the header fragment lists no such ROB", id)
		}
	}
	n := 4 * h.event.Words()
	if h.block != NoSeparator {
		dst = appendSeparator(dst, h.block, n)
	}
	return AppendFragment(dst, &h.event), h.head, nil
}

// decodeROBBytes decodes one ROB fragment, exactly the bytes p.
func decodeROBBytes(p []byte) (Fragment, error) {
	if len(p)%4 != 0 || len(p) < 8 {
		return Fragment{}, schemas.Errorf(fmtEvent, "ROB", 0, schemas.ErrTruncated, "%d bytes, not a ROB fragment", len(p))
	}
	w := make([]uint32, len(p)/4)
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(p[4*i:])
	}
	if uint64(w[1]) != uint64(len(w)) {
		return Fragment{}, schemas.Errorf(fmtEvent, "ROB fragment_size", 4, schemas.ErrInconsistent, "fragment_size %d words, the fragment holds %d", w[1], len(w))
	}
	return decodeFragment(w, p, 0, MarkerROB)
}
