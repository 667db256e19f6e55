package lhcb

import (
	"fmt"
	"io"

	"github.com/sluice-daq/sluice/schemas"
)

// Packer groups the fragments of consecutive split events into one native
// multi-fragment packet (schemas.AppendMFP) per source, as a readout board
// sends them: fragment i of every packet belongs to event first+i. A packet
// holds N events, fewer when the event ids stop being consecutive, the
// source list changes, or at Flush. Not safe for concurrent use.
type Packer struct {
	n     int
	align uint8
	emit  func(packet []byte) error

	sources []uint32 // of the pending events, in the order Add got them
	first   uint64
	count   int      // pending events
	data    [][]byte // per source: pending payloads back to back (copies)
	sizes   [][]int  // per source: pending payload sizes
	views   [][]byte // scratch for AppendMFP
	pkt     []byte
}

// NewPacker returns a Packer of packing factor n (1..schemas.MaxPacking)
// and payload alignment 2^align (align <= schemas.MaxAlign) that hands each
// finished packet to emit; emit must not keep the slice after it returns.
func NewPacker(n int, align uint8, emit func(packet []byte) error) (*Packer, error) {
	if n < 1 || n > schemas.MaxPacking || align > schemas.MaxAlign {
		return nil, fmt.Errorf("lhcb: packing factor %d (want 1..%d) or align %d (want <= %d) out of range", n, schemas.MaxPacking, align, schemas.MaxAlign)
	}
	return &Packer{n: n, align: align, emit: emit}, nil
}

// Add takes the fragments of one event (as Split returns them: one per
// source, all with the same event id) and copies their payloads.
func (p *Packer) Add(frags []schemas.Fragment) error {
	if len(frags) == 0 {
		return nil
	}
	id := frags[0].EventID
	if p.count > 0 && (id != p.first+uint64(p.count) || !p.sameSources(frags)) {
		if err := p.Flush(); err != nil {
			return err
		}
	}
	if p.count == 0 {
		p.first = id
		p.sources = p.sources[:0]
		for i := range frags {
			p.sources = append(p.sources, frags[i].SourceID)
		}
		for len(p.data) < len(frags) {
			p.data, p.sizes = append(p.data, nil), append(p.sizes, nil)
		}
		for i := range frags {
			p.data[i], p.sizes[i] = p.data[i][:0], p.sizes[i][:0]
		}
	}
	for i := range frags {
		if frags[i].EventID != id {
			return fmt.Errorf("lhcb: packer got fragments of events %d and %d in one event", id, frags[i].EventID)
		}
		p.data[i] = append(p.data[i], frags[i].Payload...)
		p.sizes[i] = append(p.sizes[i], len(frags[i].Payload))
	}
	p.count++
	if p.count == p.n {
		return p.Flush()
	}
	return nil
}

func (p *Packer) sameSources(frags []schemas.Fragment) bool {
	if len(frags) != len(p.sources) {
		return false
	}
	for i := range frags {
		if frags[i].SourceID != p.sources[i] {
			return false
		}
	}
	return true
}

// Flush emits one packet per source for the pending events, if any.
func (p *Packer) Flush() error {
	if p.count == 0 {
		return nil
	}
	for si, src := range p.sources {
		p.views = p.views[:0]
		off := 0
		for _, sz := range p.sizes[si] {
			p.views = append(p.views, p.data[si][off:off+sz])
			off += sz
		}
		p.pkt = schemas.AppendMFP(p.pkt[:0], src, p.first, 0, p.align, p.views, nil)
		if err := p.emit(p.pkt); err != nil {
			return err
		}
	}
	p.count = 0
	return nil
}

// WriteMFPs splits every event of the MDF (or MEP) stream r (see
// ForEachEvent) over the given source set (nil: the set is scanned from a
// first pass, which needs r to be an io.ReadSeeker) and hands emit one
// native MFP per source and per n consecutive events. It returns the
// source set used.
func WriteMFPs(r io.Reader, sources []uint32, n int, align uint8, emit func(packet []byte) error) ([]uint32, error) {
	if sources == nil {
		rs, ok := r.(io.ReadSeeker)
		if !ok {
			return nil, fmt.Errorf("lhcb: no source set given and the stream cannot be read twice")
		}
		var err error
		if sources, err = ScanSources(rs); err != nil {
			return nil, err
		}
		if _, err := rs.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
	}
	sp, err := NewSplitter(sources)
	if err != nil {
		return nil, err
	}
	sp.SkipCRC = true // AppendMFP computes them
	pk, err := NewPacker(n, align, emit)
	if err != nil {
		return nil, err
	}
	var frags []schemas.Fragment
	err = ForEachEvent(r, func(ev *Event) error {
		var err error
		if frags, err = sp.Split(frags[:0], &ev.Header, ev.Body, ev.Index); err != nil {
			return schemas.WithOffset(err, ev.Offset+int64(ev.Header.Len()))
		}
		return pk.Add(frags)
	})
	if err != nil {
		return nil, err
	}
	return sp.Sources(), pk.Flush()
}
