package synth

import (
	"bytes"
	"slices"
	"testing"
)

// TestEventsFixedSize: every source sends a payload of FragmentSize bytes
// made by Append, timestamps follow the bunch spacing, no faults.
func TestEventsFixedSize(t *testing.T) {
	evs := Events(Spec{Run: 3, FirstEventID: 10, Events: 5, Seed: 9, FragmentSize: 32, BunchSpacing: 25})
	if len(evs) != 5 {
		t.Fatalf("%d events", len(evs))
	}
	groups := DefaultGroups()
	for k, ev := range evs {
		id := uint64(10 + k)
		if ev.ID != id || ev.Run != 3 || ev.Timestamp != 25*id || ev.Corrupt != nil || len(ev.Fragments) != len(groups) {
			t.Fatalf("event %d: %+v", k, ev)
		}
		for gi, g := range groups {
			for si, src := range g.Sources {
				if want := Append(nil, KindOf(g.Name), 9, id, src, 32); !bytes.Equal(ev.Fragments[gi][si], want) {
					t.Fatalf("event %d source %#x: payload is not Append's", id, src)
				}
			}
		}
	}
}

// TestEventsSpreadAndFaults: sizes spread over the range and depend on the
// seed only; faults fall on the documented events and sources.
func TestEventsSpreadAndFaults(t *testing.T) {
	spec := Spec{FirstEventID: 1, Events: 64, Seed: 1, SpreadSizes: [2]int{16, 256}, Faults: true}
	sizes := func(s Spec) []int {
		var out []int
		for k, ev := range Events(s) {
			wantCorrupt, wantIncomplete := k%8 == 3, k%8 == 6
			if got := slices.Equal(ev.Corrupt, []uint32{0x100}); got != wantCorrupt {
				t.Fatalf("event %d: corrupt %x", ev.ID, ev.Corrupt)
			}
			if got := ev.Fragments[2][0] == nil; got != wantIncomplete {
				t.Fatalf("event %d: muon source 0x300 missing %v", ev.ID, got)
			}
			n := 0
			for _, g := range ev.Fragments {
				for _, p := range g {
					n += len(p)
					if p != nil && (len(p) < HeaderSize || len(p) > 256*3/2) {
						t.Fatalf("event %d: a payload of %d bytes", ev.ID, len(p))
					}
				}
			}
			out = append(out, n)
		}
		return out
	}
	a := sizes(spec)
	if !slices.Equal(a, sizes(spec)) {
		t.Fatal("the same spec gave other sizes")
	}
	other := spec
	other.Seed = 2
	if slices.Equal(a, sizes(other)) {
		t.Fatal("another seed gave the same sizes")
	}
	if lo, hi := slices.Min(a), slices.Max(a); lo > 400 || hi < 1200 {
		t.Fatalf("event sizes %d…%d do not spread over the range", lo, hi)
	}
}
