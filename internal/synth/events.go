package synth

import (
	"math"
	"math/rand/v2"

	"github.com/sluice-daq/sluice/schemas"
)

// Event is one event's content, as a batch builder outside the node takes
// it: Fragments[g][k] is the payload of source k of group g (nil for a
// source that sent nothing, which makes the event incomplete).
type Event struct {
	ID        uint64
	Run       uint32
	Timestamp uint64 // ns; 0 when not set
	Status    schemas.EventStatus
	Fragments [][][]byte
	Corrupt   []uint32 // sources whose fragment failed its CRC-32C (makes the event corrupt)
}

// DefaultGroups are the emulator-like sub-detectors of synthetic events:
// four ECAL, two HCAL and four muon sources.
func DefaultGroups() []schemas.SourceGroup {
	return []schemas.SourceGroup{
		{Name: "ecal", Sources: []uint32{0x100, 0x101, 0x102, 0x103}},
		{Name: "hcal", Sources: []uint32{0x200, 0x201}},
		{Name: "muon", Sources: []uint32{0x300, 0x301, 0x302, 0x303}},
	}
}

// Spec describes a run of synthetic events.
type Spec struct {
	Run          uint32
	FirstEventID uint64
	Events       int
	Groups       []schemas.SourceGroup // default DefaultGroups(); a group's name gives its payload Kind (KindOf)
	Seed         uint64                // of the payloads and the sizes
	// FragmentSize is every payload's bytes (>= HeaderSize; default 64)
	// unless SpreadSizes is set.
	FragmentSize int
	// SpreadSizes, when its maximum is above its minimum, spreads the
	// sizes instead: an event's mean payload bytes per source is
	// log-uniform over [min, max] (event sizes spread as multiplicities
	// do), each source's size within ±50 % of that mean, drawn from Seed.
	SpreadSizes [2]int
	// Faults, when set, makes every 8th event from the 4th corrupt (its
	// first group's first source's fragment fails its CRC) and every 8th
	// from the 7th incomplete (its last group's first source sends
	// nothing), counting from FirstEventID.
	Faults bool
	// BunchSpacing, when not 0, sets each event's timestamp to its id
	// times this many nanoseconds.
	BunchSpacing uint64
}

// Events returns the events of s, ids FirstEventID, +1, …, with the
// emulator's payloads (Append with each group's Kind): the same spec gives
// the same events, so a trigger's decisions on them are reproducible.
func Events(s Spec) []Event {
	if s.Groups == nil {
		s.Groups = DefaultGroups()
	}
	if s.FragmentSize == 0 {
		s.FragmentSize = 64
	}
	lo, hi := float64(s.SpreadSizes[0]), float64(s.SpreadSizes[1])
	spread := hi > lo
	rng := rand.New(rand.NewPCG(s.Seed, 0x51c3))
	out := make([]Event, s.Events)
	for k := range out {
		id := s.FirstEventID + uint64(k)
		ev := Event{ID: id, Run: s.Run, Timestamp: id * s.BunchSpacing, Fragments: make([][][]byte, len(s.Groups))}
		mean := 0.0
		if spread {
			mean = lo * math.Pow(hi/lo, rng.Float64())
		}
		corrupt, incomplete := s.Faults && k%8 == 3, s.Faults && k%8 == 6
		for gi, g := range s.Groups {
			kind := KindOf(g.Name)
			ev.Fragments[gi] = make([][]byte, len(g.Sources))
			for si, src := range g.Sources {
				size := s.FragmentSize
				if spread {
					// Drawn for every source, sent or not, so that a fault
					// does not shift the sizes of the events after it.
					size = int(mean * (0.5 + rng.Float64()))
				}
				if incomplete && gi == len(s.Groups)-1 && si == 0 {
					continue
				}
				ev.Fragments[gi][si] = Append(nil, kind, s.Seed, id, src, size)
				if corrupt && gi == 0 && si == 0 {
					ev.Corrupt = append(ev.Corrupt, src)
				}
			}
		}
		out[k] = ev
	}
	return out
}
