// Package synthbatch builds event batches (schemas.EventSchema) outside the
// builder: from given fragments, or of the synthetic events of
// internal/synth. Tests, benchmarks and triggertest use it to feed plugins.
package synthbatch

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/internal/synth"
	"github.com/sluice-daq/sluice/schemas"
)

// Event is one event's content (see synth.Event).
type Event = synth.Event

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

// Spec describes a batch of synthetic events (see synth.Spec).
type Spec = synth.Spec

// Synthetic makes one batch of the synthetic events of s (synth.Events),
// with timestamps 25 ns apart (the LHC bunch spacing) unless s sets
// another spacing. The caller releases the batch.
func Synthetic(mem memory.Allocator, s Spec) (arrow.RecordBatch, error) {
	if s.Groups == nil {
		s.Groups = synth.DefaultGroups()
	}
	if s.BunchSpacing == 0 {
		s.BunchSpacing = 25
	}
	return Build(mem, s.Groups, synth.Events(s))
}
