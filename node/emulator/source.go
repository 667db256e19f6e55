package emulator

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/sluice-daq/sluice/internal/gzfile"
	"github.com/sluice-daq/sluice/internal/synth"
	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
	"github.com/sluice-daq/sluice/schemas/formats"
	"github.com/sluice-daq/sluice/schemas/lhcb"
	"github.com/sluice-daq/sluice/schemas/native"
)

// emuPacket is one unit the emulator sends: an MFP, or a bare VDIF frame
// for VTP.
type emuPacket struct {
	b      []byte
	source uint32
	n      int    // fragments
	event  uint64 // event id of its first fragment, relative to the run's (file mode: the file's) first
	// pace is the place of its first event among the run's events (0, 1,
	// 2, ... however the event ids run): it goes out at t0 + pace/rate.
	pace uint64
	// borrowed: b is the source's own copy of the packet (replayed in
	// place), valid until the next call of next; never recycled.
	borrowed bool
	// placed (borrowed packets): where the sender last put it, so that a
	// readout ring holding its bytes from a lap before is not written
	// them again (transport.Placement).
	placed *transport.Placement
}

// packet is p for a sender, numbered seq.
func (p *emuPacket) packet(seq uint64) transport.Packet {
	return transport.Packet{Bytes: p.b, Source: p.source, Seq: seq, Placed: p.placed}
}

// packetSource yields the packets of a run in sending order.
type packetSource interface {
	// next returns the next packet, built in dst's storage, or ok=false at
	// the end of the run.
	next(dst []byte) (p emuPacket, ok bool)
	sources() int
}

// synthSource generates detector-like packets: for each block of Packing
// consecutive events, one MFP per source.
type synthSource struct {
	ids     []uint32
	kinds   []synth.Kind
	packing int
	size    SizeDist
	seed    uint64
	first   uint64
	events  uint64 // 0: unbounded (Duration ends the run)
	rng     *rand.Rand

	block, src int
	payload    []byte
	views      [][]byte
}

func newSynthSource(cfg *Config) *synthSource {
	s := &synthSource{packing: cfg.Packing, size: cfg.FragmentSize, seed: cfg.Seed, first: cfg.FirstEventID, events: cfg.Events,
		rng: rand.New(rand.NewPCG(cfg.Seed, 0x5EED))}
	for _, g := range cfg.Groups {
		for _, id := range g.Sources {
			s.ids = append(s.ids, id)
			s.kinds = append(s.kinds, synth.KindOf(g.Name))
		}
	}
	return s
}

func (s *synthSource) sources() int { return len(s.ids) }

func (s *synthSource) next(dst []byte) (emuPacket, bool) {
	start := uint64(s.block) * uint64(s.packing)
	if s.events > 0 && start >= s.events {
		return emuPacket{}, false
	}
	n := s.packing
	if s.events > 0 {
		n = int(min(uint64(n), s.events-start))
	}
	id, kind := s.ids[s.src], s.kinds[s.src]
	s.payload, s.views = s.payload[:0], s.views[:0]
	offs := make([]int, 0, n+1)
	for i := 0; i < n; i++ {
		offs = append(offs, len(s.payload))
		s.payload = synth.Append(s.payload, kind, s.seed, s.first+start+uint64(i), id, s.size.draw(s.rng))
	}
	offs = append(offs, len(s.payload))
	for i := 0; i < n; i++ {
		s.views = append(s.views, s.payload[offs[i]:offs[i+1]])
	}
	p := emuPacket{b: schemas.AppendMFP(dst[:0], id, s.first+start, 0, 3, s.views, nil), source: id, n: n, event: start, pace: start}
	if s.src++; s.src == len(s.ids) {
		s.src = 0
		s.block++
	}
	return p, true
}

// fileSource replays the packets split from a file Loop times, shifting
// event ids by the file's span on each replay so they stay unique.
//
// A real readout replaying a file with shifted event ids sends data that
// agree with them: in LHCb data the event id is the ODIN bank's event
// number, so on a shifted pass the ODIN banks get the shifted id too (and
// their fragments new CRCs). Otherwise the events exported from the store
// would carry the ODIN numbers of the first pass, duplicated. The MDF
// header the header fragment carries has no event number (versions 1–3:
// run, orbit, bunch; the splitter takes the event id from ODIN only).
type fileSource struct {
	packets []emuPacket // from the file, first pass
	span    uint64      // event ids the file covers
	events  uint64      // distinct event ids in the file: the pace of a pass
	minID   uint64
	loops   int
	raw     bool // packets are bare VDIF frames or FEROL blocks (no MFP event id to shift)
	nsrc    int
	i, loop int
	// inPlace: next may hand out the file's packets themselves, their
	// event id rewritten in place, instead of a copy (the emulator sets it
	// when no fault keeps or changes a packet after it is sent).
	inPlace bool
	// placed: one per packet, what the run's sender keeps of where it put
	// the packet (borrowed packets only; made at the first pass).
	placed []transport.Placement

	odin  map[int][]odinPatch // packet index -> the ODIN banks in it
	spare []byte              // buffer a renumbered packet is re-encoded into
	views [][]byte
}

// odinPatch locates the payload of one ODIN bank in a packet: in fragment
// frag, off bytes into the fragment's payload.
type odinPatch struct{ frag, off int }

func (f *fileSource) sources() int { return f.nsrc }

// sourceIDs are the sources of the file's packets, sorted.
func (f *fileSource) sourceIDs() []uint32 {
	seen := map[uint32]bool{}
	var ids []uint32
	for i := range f.packets {
		if s := f.packets[i].source; !seen[s] {
			seen[s] = true
			ids = append(ids, s)
		}
	}
	slices.Sort(ids)
	return ids
}

func (f *fileSource) next(dst []byte) (emuPacket, bool) {
	if f.i == len(f.packets) {
		f.i, f.loop = 0, f.loop+1
	}
	if f.loop >= f.loops || len(f.packets) == 0 {
		return emuPacket{}, false
	}
	p := f.packets[f.i]
	patches := f.odin[f.i]
	f.i++
	shift := uint64(f.loop) * f.span
	p.pace += uint64(f.loop) * f.events
	if f.inPlace && (shift == 0 || len(patches) == 0) {
		// The packet as stored, its first event id rewritten: one copy
		// fewer per byte than copying it into dst (the sender copies it
		// into the ring or socket). A packet whose ODIN banks are
		// renumbered is re-encoded below instead, leaving the stored one.
		p.borrowed = true
		p.event += shift
		if f.placed == nil {
			f.placed = make([]transport.Placement, len(f.packets))
		}
		p.placed = &f.placed[f.i-1]
		p.placed.PassStart = f.i == 1
		if !f.raw {
			binary.LittleEndian.PutUint64(p.b[16:], f.minID+p.event)
			p.placed.Header = schemas.MFPHeaderSize // the event id; the rest is the same every pass
		}
		return p, true
	}
	p.b = append(dst[:0], p.b...)
	p.event += shift
	if !f.raw {
		first := binary.LittleEndian.Uint64(p.b[16:])
		binary.LittleEndian.PutUint64(p.b[16:], first+shift)
		if shift > 0 && len(patches) > 0 {
			p.b = f.renumberODIN(p.b, patches)
		}
	}
	return p, true
}

// renumberODIN sets the event number of every ODIN bank listed in patches
// to the (shifted) event id of its fragment in packet b, and returns the
// packet re-encoded so that the fragment CRCs cover the new bytes. The
// returned buffer replaces b, which the source keeps for the next time.
func (f *fileSource) renumberODIN(b []byte, patches []odinPatch) []byte {
	m, _, err := schemas.DecodeMFP(b)
	if err != nil {
		return b // not reached: loadFile decoded every packet
	}
	f.views = f.views[:0]
	m.Fragments(func(_ int, _ uint64, _ uint32, payload []byte) bool {
		f.views = append(f.views, payload)
		return true
	})
	for _, pt := range patches {
		putODINEventNumber(f.views[pt.frag][pt.off:], m.FirstEventID+uint64(pt.frag))
	}
	out := schemas.AppendMFP(f.spare[:0], m.SourceID, m.FirstEventID, m.Flags, m.Align, f.views, nil)
	f.spare = b
	return out
}

// putODINEventNumber writes event number n into the ODIN version 6
// payload at the start of w: word 3 the high, word 4 the low 32 bits,
// little-endian (the ODIN v6 bank layout; schemas/lhcb documents it). Every other bit stays as it is;
// a DecodeODIN/AppendODIN round trip would clear the bits of word 8 the
// ODIN struct has no field for (bit 15).
func putODINEventNumber(w []byte, n uint64) {
	binary.LittleEndian.PutUint32(w[12:], uint32(n>>32))
	binary.LittleEndian.PutUint32(w[16:], uint32(n))
}

// findODIN lists, for each packet of an LHCb source that carries ODIN
// banks (lhcb.BankTypeODIN), where their payloads are, and checks that each
// is a version 6 ODIN payload whose event number can be rewritten.
func (f *fileSource) findODIN() error {
	for k := range f.packets {
		if typ, _, ok := lhcb.SplitSourceID(f.packets[k].source); !ok || typ != lhcb.BankTypeODIN {
			continue
		}
		m, _, err := schemas.DecodeMFP(f.packets[k].b)
		if err != nil {
			return err
		}
		m.Fragments(func(i int, ev uint64, _ uint32, payload []byte) bool {
			for at := 0; at < len(payload); {
				// Invariant: payload[:at] is whole banks, the ODIN ones listed.
				b, n, berr := lhcb.DecodeBank(payload[at:])
				if berr != nil {
					err = fmt.Errorf("event %d, source %#x: %w", ev, m.SourceID, schemas.WithOffset(berr, int64(at)))
					return false
				}
				if b.Type == lhcb.BankTypeODIN {
					if _, oerr := lhcb.DecodeODIN(b.Version, b.Data); oerr != nil {
						err = fmt.Errorf("event %d, source %#x: %w", ev, m.SourceID, schemas.WithOffset(oerr, int64(at+lhcb.BankHeaderSize)))
						return false
					}
					if f.odin == nil {
						f.odin = map[int][]odinPatch{}
					}
					f.odin[k] = append(f.odin[k], odinPatch{frag: i, off: at + lhcb.BankHeaderSize})
				}
				at += n
			}
			return true
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// loadFile reads the file at path (gzipped or not), finds its format by
// the registry's detection (schemas/formats) and makes its packets: a
// format whose records the destination's packets carry as they are
// (format.Framer of payload's framing: sluice's own packets for any MFP
// input, VDIF frames for VTP, a FED fragment's FEROL blocks for a FEROL
// TCP input) is replayed record for record; any other format that splits
// into fragments (format.Splitter: LHCb MDF/MEP, CMS FRD and FEROL,
// ATLAS eformat full events, BESIII raw, VDIF, sluice's fragments) is
// split as `sluice inspect` splits it and packed into MFPs of up to
// packing fragments per source (packer). It returns the packets and the
// file's format; to (the destination) is for errors. The whole file is held in memory: it is a sample
// replayed in a loop.
func loadFile(path string, packing int, loops int, to string, payload transport.Payload) (*fileSource, format.Format, error) {
	data, err := gzfile.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	head := data[:min(len(data), format.HeadBytes)]
	kind := formats.Detect(head)
	if kind == nil {
		if err := formats.Refusal(head); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		return nil, nil, fmt.Errorf("%s: no format sluice reads: the first bytes are not %s", path, formats.Signs())
	}
	sp, ok := kind.(format.Splitter)
	if !ok {
		return nil, nil, fmt.Errorf("%s: %s is a format sluice only inspects; the emulator replays %s", path, kind.Name(), strings.Join(Formats(), ", "))
	}
	f := &fileSource{loops: loops, raw: payload != transport.PayloadMFP}
	if fr, ok := kind.(format.Framer); ok && fr.Framing() == payload.String() {
		if f.raw && loops > 1 {
			return nil, nil, fmt.Errorf("%s: %s records sent as they are carry their event ids in their bytes: --loop must be 1", path, kind.Name())
		}
		err = fr.Frames(data, func(fm format.Frame) error {
			f.packets = append(f.packets, emuPacket{b: slices.Clone(fm.Bytes), source: fm.Source, n: fm.Fragments, event: fm.Event})
			return nil
		})
	} else if f.raw {
		return nil, nil, fmt.Errorf("%s: %s sends %s records as a file holds them, one per packet; this file is %s: %s", path, to, payload, kind.Name(), framersOf(payload))
	} else {
		err = splitFile(f, sp, data, packing)
	}
	if err != nil {
		if strings.HasPrefix(err.Error(), kind.Name()+":") { // a decode error names its format
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		return nil, nil, fmt.Errorf("%s: %s: %w", path, kind.Name(), err)
	}
	if len(f.packets) == 0 {
		return nil, nil, fmt.Errorf("%s: %s: no events in the file", path, kind.Name())
	}
	lo, hi := f.packets[0].event, f.packets[0].event
	srcs := map[uint32]bool{}
	for i := range f.packets {
		p := &f.packets[i]
		lo, hi = min(lo, p.event), max(hi, p.event+uint64(p.n)-1)
		srcs[p.source] = true
	}
	f.minID, f.span, f.nsrc = lo, hi-lo+1, len(srcs)
	// LHCb data: split from MDF/MEP here, or a native stream recorded
	// from such a split (it has the header fragment's source).
	ours := kind == native.MFPFormat || kind == native.FragmentFormat
	if kind == lhcb.MDFFormat || kind == lhcb.MEPFormat || (ours && srcs[lhcb.HeaderSource]) {
		if err := f.findODIN(); err != nil {
			return nil, nil, fmt.Errorf("%s: ODIN bank: %w", path, err)
		}
	}
	// Pacing counts the file's events, not its event ids: ids with gaps
	// (a VDIF second's frames end at the frame rate, then the next second's
	// id is 2^24 on; BESIII global ids skip) would hold a paced replay up
	// for as long as the gap at the rate (hours for VDIF).
	var ids []uint64 // every fragment's event: a packet holds n of them
	for i := range f.packets {
		p := &f.packets[i]
		p.event -= lo
		for k := range uint64(p.n) {
			ids = append(ids, p.event+k)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	for i := range f.packets {
		k, _ := slices.BinarySearch(ids, f.packets[i].event)
		f.packets[i].pace = uint64(k)
	}
	f.events = uint64(len(ids))
	return f, kind, nil
}

// splitFile splits data with sp over the file's own sources (sp.Sources)
// and packs the fragments into f's packets.
func splitFile(f *fileSource, sp format.Splitter, data []byte, packing int) error {
	groups, err := sp.Sources(bytes.NewReader(data))
	if err != nil {
		return err
	}
	pk := newPacker(packing, func(p emuPacket) { f.packets = append(f.packets, p) })
	err = sp.Split(bytes.NewReader(data), groups, func(p format.Piece) error {
		for i := range p.Fragments {
			pk.add(&p.Fragments[i])
		}
		return nil
	})
	if err != nil {
		return err
	}
	pk.flush()
	return nil
}

// modeName is the name Summary.Mode gives a file's format: its export
// name (`sluice store export --format`) when it has one, else its name.
func modeName(f format.Format) string {
	if e, ok := format.ExportOf(f); ok {
		return e.ExportName()
	}
	return f.Name()
}

// Formats names the formats the emulator replays from a file, in the
// registry's order: every format that splits (format.Splitter).
func Formats() []string {
	var names []string
	for _, f := range formats.All() {
		if _, ok := f.(format.Splitter); ok {
			names = append(names, f.Name())
		}
	}
	return names
}

// framersOf lists the formats whose records a packet of payload carries.
func framersOf(payload transport.Payload) string {
	var names []string
	for _, f := range formats.All() {
		if fr, ok := f.(format.Framer); ok && fr.Framing() == payload.String() {
			names = append(names, f.Name())
		}
	}
	return "give a " + strings.Join(names, " or ") + " file"
}

// keep drops the packets of sources not in ids (a readout unit of a farm
// replays only its share of a file's sources), keeping the event ids and
// their span as the whole file has them. Errors: no packet left.
func (f *fileSource) keep(ids []uint32) error {
	want := make(map[uint32]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	var kept []emuPacket
	odin := map[int][]odinPatch{}
	srcs := map[uint32]bool{}
	for i, p := range f.packets {
		if !want[p.source] {
			continue
		}
		if pt, ok := f.odin[i]; ok {
			odin[len(kept)] = pt
		}
		kept = append(kept, p)
		srcs[p.source] = true
	}
	if len(kept) == 0 {
		return fmt.Errorf("none of the file's sources is in the source list")
	}
	f.packets, f.odin, f.nsrc = kept, odin, len(srcs)
	return nil
}
