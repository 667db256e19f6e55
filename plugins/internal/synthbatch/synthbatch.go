// Package synthbatch builds event batches (schemas.EventSchema) outside the
// builder: from given fragments, or filled with the emulator's synthetic
// detector payloads (schemas/synth). Tests, benchmarks, `sluice plugin
// check` and triggertest use it to feed plugins.
package synthbatch

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/synth"
)

// Event is one event's content: Fragments[g][k] is the payload of source k
// of group g (nil for a missing source, which sets StatusIncomplete).
type Event struct {
	ID        uint64
	Run       uint32
	Timestamp uint64
	Status    schemas.EventStatus
	Fragments [][][]byte
	Corrupt   []uint32 // sources whose fragment failed its CRC (sets StatusCorrupt)
}

// Build assembles events into one event batch of the given groups, as the
// builder would: per group one LargeBinary payload column (the sources'
// payloads back to back) and one list<uint32> of sizes. The caller releases
// the batch.
func Build(mem memory.Allocator, groups []schemas.SourceGroup, events []Event) (arrow.RecordBatch, error) {
	schema, err := schemas.EventSchema(schemas.ModeEvent, groups)
	if err != nil {
		return nil, err
	}
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	ids := b.Field(0).(*array.Uint64Builder)
	runs := b.Field(1).(*array.Uint32Builder)
	ts := b.Field(2).(*array.Uint64Builder)
	status := b.Field(3).(*array.Uint32Builder)
	nfrag := b.Field(4).(*array.Uint32Builder)
	missing := b.Field(5).(*array.ListBuilder)
	corrupt := b.Field(6).(*array.ListBuilder)
	for gi := range groups {
		total := 0
		for _, ev := range events {
			if gi >= len(ev.Fragments) {
				continue
			}
			for _, p := range ev.Fragments[gi] {
				total += len(p)
			}
		}
		b.Field(7 + 2*gi).(*array.BinaryBuilder).ReserveData(total)
	}
	for _, ev := range events {
		if len(ev.Fragments) != len(groups) {
			return nil, fmt.Errorf("synthbatch: event %d has fragments for %d groups, schema has %d", ev.ID, len(ev.Fragments), len(groups))
		}
		ids.Append(ev.ID)
		runs.Append(ev.Run)
		ts.Append(ev.Timestamp)
		st := ev.Status
		n := uint32(0)
		missing.Append(true)
		for gi, g := range groups {
			frags := ev.Fragments[gi]
			if len(frags) != len(g.Sources) {
				return nil, fmt.Errorf("synthbatch: event %d group %s has %d fragments for %d sources", ev.ID, g.Name, len(frags), len(g.Sources))
			}
			pay := b.Field(7 + 2*gi).(*array.BinaryBuilder)
			sizes := b.Field(8 + 2*gi).(*array.ListBuilder)
			sizes.Append(true)
			var all []byte
			for k, p := range frags {
				sizes.ValueBuilder().(*array.Uint32Builder).Append(uint32(len(p)))
				if p == nil {
					missing.ValueBuilder().(*array.Uint32Builder).Append(g.Sources[k])
					st |= schemas.StatusIncomplete
					continue
				}
				n++
				all = append(all, p...)
			}
			pay.Append(all)
		}
		corrupt.Append(true)
		for _, src := range ev.Corrupt {
			corrupt.ValueBuilder().(*array.Uint32Builder).Append(src)
			st |= schemas.StatusCorrupt
		}
		status.Append(uint32(st))
		nfrag.Append(n)
	}
	return b.NewRecordBatch(), nil
}

// DefaultGroups are the emulator-like sub-detectors of Synthetic batches:
// four ECAL, two HCAL and four muon sources.
func DefaultGroups() []schemas.SourceGroup {
	return []schemas.SourceGroup{
		{Name: "ecal", Sources: []uint32{0x100, 0x101, 0x102, 0x103}},
		{Name: "hcal", Sources: []uint32{0x200, 0x201}},
		{Name: "muon", Sources: []uint32{0x300, 0x301, 0x302, 0x303}},
	}
}

// Spec describes a batch of synthetic events.
type Spec struct {
	Run          uint32
	FirstEventID uint64
	Events       int
	Groups       []schemas.SourceGroup // default DefaultGroups()
	FragmentSize int                   // payload bytes per source (>= synth.HeaderSize); default 64
	Seed         uint64
}

// Synthetic makes a batch of Events events with ids FirstEventID, +1, …
// whose payloads are the emulator's (synth.Append with the kind of each
// group's name), so a trigger's decisions on it are reproducible.
func Synthetic(mem memory.Allocator, s Spec) (arrow.RecordBatch, error) {
	if s.Groups == nil {
		s.Groups = DefaultGroups()
	}
	if s.FragmentSize == 0 {
		s.FragmentSize = 64
	}
	events := make([]Event, s.Events)
	for i := range events {
		id := s.FirstEventID + uint64(i)
		ev := Event{ID: id, Run: s.Run, Timestamp: id * 25, Fragments: make([][][]byte, len(s.Groups))}
		for gi, g := range s.Groups {
			kind := synth.KindOf(g.Name)
			ev.Fragments[gi] = make([][]byte, len(g.Sources))
			for k, src := range g.Sources {
				ev.Fragments[gi][k] = synth.Append(nil, kind, s.Seed, id, src, s.FragmentSize)
			}
		}
		events[i] = ev
	}
	return Build(mem, s.Groups, events)
}
