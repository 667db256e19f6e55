package besiii

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-daq/sluice/schemas"
)

// Markers of the eformat v3.0 fragments (BOSS eformat/HeaderMarker.h).
const (
	MarkerFullEvent   uint32 = 0xaa1234aa
	MarkerSubDetector uint32 = 0xbb1234bb
	MarkerROS         uint32 = 0xcc1234cc
	MarkerROB         uint32 = 0xdd1234dd
	MarkerROD         uint32 = 0xee1234ee
)

// Version is the eformat version BESIII writes (major in the high 16
// bits); fragments of another major version are refused.
const Version uint32 = 0x03000000

// fullEventSpecific is the count of a v3.0 full event's specific words.
const fullEventSpecific = 10

const (
	fmtEvent = "besiii-event"
	fmtROD   = "besiii-rod"
)

// childOf is the marker of the children of a fragment of each marker (0:
// a ROB, whose payload is a ROD).
var childOf = map[uint32]uint32{MarkerFullEvent: MarkerSubDetector, MarkerSubDetector: MarkerROS, MarkerROS: MarkerROB, MarkerROB: 0}

var levelName = map[uint32]string{MarkerFullEvent: "full event", MarkerSubDetector: "sub-detector", MarkerROS: "ROS", MarkerROB: "ROB"}

// Fragment is a decoded eformat v3.0 fragment of any level: a full event,
// a sub-detector, a ROS or a ROB fragment. Slices are word values.
type Fragment struct {
	Marker   uint32 // MarkerFullEvent, MarkerSubDetector, MarkerROS or MarkerROB
	Version  uint32
	SourceID uint32
	Status   []uint32
	Specific []uint32
	// Children are the fragments of the next level (none for a ROB).
	Children []Fragment
	// ROD is a ROB's payload: its ROD fragment's words.
	ROD []uint32

	// raw is a decoded ROB's bytes (aliasing the decoded buffer), so that
	// splitting sends them without encoding again.
	raw []byte
}

// Words is the fragment's encoded size in words.
func (f *Fragment) Words() int {
	n := f.HeaderWords() + len(f.ROD)
	for i := range f.Children {
		n += f.Children[i].Words()
	}
	return n
}

// HeaderWords is the fragment's header size in words.
func (f *Fragment) HeaderWords() int { return 7 + len(f.Status) + len(f.Specific) }

// specific returns specific word i of a full event, 0 when it has fewer.
func (f *Fragment) specific(i int) uint32 {
	if i < len(f.Specific) {
		return f.Specific[i]
	}
	return 0
}

// The full event's specific words.

// Time is the event's time, Unix seconds.
func (f *Fragment) Time() uint32 { return f.specific(0) }

// GlobalID is the event builder's event id, unique in a run.
func (f *Fragment) GlobalID() uint32 { return f.specific(1) }

// Run is the run number.
func (f *Fragment) Run() uint32 { return f.specific(2) }

// L1ID is the level-1 id.
func (f *Fragment) L1ID() uint32 { return f.specific(3) }

// L1TriggerType is the level-1 trigger type.
func (f *Fragment) L1TriggerType() uint32 { return f.specific(4) }

// ROBs calls fn with every ROB under f (f itself when it is one), in
// order, until fn returns false.
func (f *Fragment) ROBs(fn func(r *Fragment) bool) bool {
	if f.Marker == MarkerROB {
		return fn(f)
	}
	for i := range f.Children {
		if !f.Children[i].ROBs(fn) {
			return false
		}
	}
	return true
}

// AppendFragment appends f, with its children, to dst in little-endian
// byte order, every size computed from the contents.
func AppendFragment(dst []byte, f *Fragment) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint32(dst, f.Marker)
	dst = le.AppendUint32(dst, uint32(f.Words()))
	dst = le.AppendUint32(dst, uint32(f.HeaderWords()))
	dst = le.AppendUint32(dst, f.Version)
	dst = le.AppendUint32(dst, f.SourceID)
	dst = le.AppendUint32(dst, uint32(len(f.Status)))
	dst = appendWords(dst, f.Status)
	dst = le.AppendUint32(dst, uint32(len(f.Specific)))
	dst = appendWords(dst, f.Specific)
	for i := range f.Children {
		dst = AppendFragment(dst, &f.Children[i])
	}
	return appendWords(dst, f.ROD)
}

func appendWords(dst []byte, w []uint32) []byte {
	for _, x := range w {
		dst = binary.LittleEndian.AppendUint32(dst, x)
	}
	return dst
}

// DecodeEvent decodes the v3.0 full event at the start of b, with every
// fragment under it, and returns it with the bytes it occupies. A
// decoded ROB's ROD words alias nothing; the fragment keeps b's bytes of
// each ROB for SplitEvent. Errors: *schemas.DecodeError (offsets in b)
// wrapping ErrTruncated, ErrBadMagic, ErrBadVersion, ErrSizeOverflow,
// ErrInconsistent, or ErrUnsupported for a byte-swapped event.
func DecodeEvent(b []byte) (Fragment, int, error) {
	if len(b) < 8 {
		return Fragment{}, 0, schemas.Errorf(fmtEvent, "fragment_size", 0, schemas.ErrTruncated, "need 8 bytes, have %d", len(b))
	}
	le := binary.LittleEndian
	switch m := le.Uint32(b); m {
	case MarkerFullEvent:
	case swap(MarkerFullEvent):
		return Fragment{}, 0, schemas.Errorf(fmtEvent, "marker", 0, schemas.ErrUnsupported, "a byte-swapped (big-endian) v3.0 event; BESIII writes little-endian")
	default:
		return Fragment{}, 0, schemas.Errorf(fmtEvent, "marker", 0, schemas.ErrBadMagic, "want 0x%08x, have 0x%08x", MarkerFullEvent, m)
	}
	size := uint64(le.Uint32(b[4:]))
	if 4*size > uint64(len(b)) {
		return Fragment{}, 0, schemas.Errorf(fmtEvent, "fragment_size", 4, schemas.ErrTruncated, "fragment of %d words, the buffer holds %d bytes", size, len(b))
	}
	w := make([]uint32, size)
	for i := range w {
		w[i] = le.Uint32(b[4*i:])
	}
	f, err := decodeFragment(w, b[:4*size], 0, MarkerFullEvent)
	if err != nil {
		return f, 0, err
	}
	if len(f.Specific) != fullEventSpecific {
		return f, 0, schemas.Errorf(fmtEvent, "nspecific", 4*(6+int64(len(f.Status))), schemas.ErrInconsistent, "a v3.0 full event has %d specific words, this one %d", fullEventSpecific, len(f.Specific))
	}
	return f, 4 * int(size), nil
}

func swap(x uint32) uint32 {
	return x>>24 | x>>8&0xFF00 | x<<8&0xFF0000 | x<<24
}

// decodeFragment decodes w (exactly one fragment's words, raw its bytes)
// at byte offset base, as a fragment with marker want.
func decodeFragment(w []uint32, raw []byte, base int64, want uint32) (Fragment, error) {
	at := func(i int) int64 { return base + 4*int64(i) }
	name := levelName[want]
	if len(w) < 7 {
		return Fragment{}, schemas.Errorf(fmtEvent, name, base, schemas.ErrSizeOverflow, "fragment_size %d words is smaller than the 7-word generic header", len(w))
	}
	if w[0] != want {
		return Fragment{}, schemas.Errorf(fmtEvent, name+" marker", base, schemas.ErrBadMagic, "want 0x%08x, have 0x%08x", want, w[0])
	}
	f := Fragment{Marker: want, Version: w[3], SourceID: w[4]}
	if f.Version>>16 != Version>>16 {
		return f, schemas.Errorf(fmtEvent, name+" version", at(3), schemas.ErrBadVersion, "want major 0x0300, have 0x%08x", f.Version)
	}
	hs, n := uint64(w[2]), uint64(len(w))
	nstatus := uint64(w[5])
	if 7+nstatus > n {
		return f, schemas.Errorf(fmtEvent, name+" nstatus", at(5), schemas.ErrSizeOverflow, "%d status words do not fit a fragment of %d words", nstatus, n)
	}
	nspec := uint64(w[6+nstatus])
	if want := 7 + nstatus + nspec; hs != want || hs > n {
		return f, schemas.Errorf(fmtEvent, name+" header_size", at(2), schemas.ErrInconsistent, "header_size %d, 7 + nstatus %d + nspecific %d = %d, fragment of %d words", hs, nstatus, nspec, want, n)
	}
	f.Status = w[6 : 6+nstatus : 6+nstatus]
	f.Specific = w[7+nstatus : hs : hs]
	payload := w[hs:]
	child := childOf[want]
	if child == 0 {
		if err := checkROD(payload, at(int(hs))); err != nil {
			return f, err
		}
		f.ROD, f.raw = payload, raw
		return f, nil
	}
	for q := 0; q < len(payload); {
		rest := payload[q:]
		off := at(int(hs) + q)
		if len(rest) < 2 || uint64(rest[1]) > uint64(len(rest)) || rest[1] < 7 {
			size := uint32(0)
			if len(rest) >= 2 {
				size = rest[1]
			}
			return f, schemas.Errorf(fmtEvent, levelName[child]+" fragment_size", off+4, schemas.ErrSizeOverflow, "%s %d of %d words in the %d words left of its %s", levelName[child], len(f.Children), size, len(rest), name)
		}
		cw := rest[:rest[1]]
		start := 4 * (int(hs) + q)
		c, err := decodeFragment(cw, raw[start:start+4*len(cw)], off, child)
		if err != nil {
			return f, err
		}
		f.Children = append(f.Children, c)
		q += len(cw)
	}
	return f, nil
}

// checkROD checks that w (a ROB's payload, at byte offset base) is one
// ROD fragment of major version 3.
func checkROD(w []uint32, base int64) error {
	if len(w) < 12 {
		return schemas.Errorf(fmtROD, "ROD", base, schemas.ErrSizeOverflow, "a ROD of %d words, less than its 9-word header and 3-word trailer", len(w))
	}
	if w[0] != MarkerROD {
		return schemas.Errorf(fmtROD, "marker", base, schemas.ErrBadMagic, "want 0x%08x, have 0x%08x", MarkerROD, w[0])
	}
	if w[1] != 9 {
		return schemas.Errorf(fmtROD, "header_size", base+4, schemas.ErrInconsistent, "want 9, have %d", w[1])
	}
	if w[2]>>16 != Version>>16 {
		return schemas.Errorf(fmtROD, "version", base+8, schemas.ErrBadVersion, "want major 0x0300, have 0x%08x", w[2])
	}
	n := len(w)
	nstatus, ndata := uint64(w[n-3]), uint64(w[n-2])
	if 12+nstatus+ndata != uint64(n) {
		return schemas.Errorf(fmtROD, "trailer", base+4*int64(n-3), schemas.ErrInconsistent, "12 + nstatus %d + ndata %d words, the ROB's payload holds %d", nstatus, ndata, n)
	}
	return nil
}

// String names the fragment for errors and notes.
func (f *Fragment) String() string {
	return fmt.Sprintf("%s 0x%08x", levelName[f.Marker], f.SourceID)
}
