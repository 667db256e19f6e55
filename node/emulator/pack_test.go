package emulator

import (
	"testing"

	"github.com/sluice-daq/sluice/schemas"
)

// The packer closes a source's packet at a gap in its event ids, at a
// change of flags (FlagEmpty aside: an empty payload says it) and when
// full; it keeps each fragment's CRC as given, and flushes what is open
// in the order of first events.
func TestPacker(t *testing.T) {
	var got []emuPacket
	pk := newPacker(3, func(p emuPacket) { got = append(got, p) })
	for _, f := range []schemas.Fragment{
		{SourceID: 1, EventID: 10, Payload: []byte("a"), CRC: 7},
		{SourceID: 2, EventID: 10, Flags: schemas.FlagEmpty},
		{SourceID: 1, EventID: 11, Payload: []byte("b"), CRC: 8},
		{SourceID: 2, EventID: 11, Payload: []byte("x")},
		{SourceID: 1, EventID: 13, Payload: []byte("c")},                                 // gap: 1's packet of 10-11 goes
		{SourceID: 2, EventID: 12, Flags: schemas.FlagSourceError, Payload: []byte("y")}, // flags: 2's packet of 10-11 goes
		{SourceID: 2, EventID: 13, Flags: schemas.FlagSourceError},
		{SourceID: 2, EventID: 14, Flags: schemas.FlagSourceError}, // full: 2's packet of 12-14 goes
	} {
		pk.add(&f)
	}
	pk.flush() // 1's packet of 13
	want := []struct {
		src   uint32
		first uint64
		n     int
		flags schemas.FragmentFlag
	}{{1, 10, 2, 0}, {2, 10, 2, 0}, {2, 12, 3, schemas.FlagSourceError}, {1, 13, 1, 0}}
	if len(got) != len(want) {
		t.Fatalf("%d packets, want %d", len(got), len(want))
	}
	for i, w := range want {
		m, _, err := schemas.DecodeMFP(got[i].b)
		if err != nil || m.SourceID != w.src || m.FirstEventID != w.first || m.N != w.n || m.Flags != w.flags ||
			got[i].source != w.src || got[i].event != w.first || got[i].n != w.n {
			t.Fatalf("packet %d: %+v (%v), want %+v", i, m, err, w)
		}
	}
	m, _, _ := schemas.DecodeMFP(got[0].b)
	if m.CRC(0) != 7 || m.CRC(1) != 8 {
		t.Fatalf("CRCs %d %d, want the fragments' 7 8", m.CRC(0), m.CRC(1))
	}
}
