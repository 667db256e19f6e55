package triggertest

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/plugins/internal/synthbatch"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/format"
	"github.com/sluice-daq/sluice/schemas/formats"
	"github.com/sluice-daq/sluice/schemas/lhcb"
	"github.com/sluice-daq/sluice/schemas/native"
)

// Synthetic returns batches of the emulator's synthetic events (ECAL, HCAL
// and muon groups of internal/synth payloads, fragmentSize bytes per source)
// with event ids first, first+1, …, batchEvents per batch. The caller
// releases the batches.
func Synthetic(mem memory.Allocator, first uint64, events, batchEvents, fragmentSize int, seed uint64) ([]arrow.RecordBatch, error) {
	var out []arrow.RecordBatch
	for done := 0; done < events; done += batchEvents {
		rec, err := synthbatch.Synthetic(mem, synthbatch.Spec{FirstEventID: first + uint64(done),
			Events: min(batchEvents, events-done), FragmentSize: fragmentSize, Seed: seed})
		if err != nil {
			Release(out)
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// File returns the events of a stream in any format that splits into
// sluice fragments (schemas/formats: sluice fragments or packets, LHCb MDF
// or MEP, VDIF, CMS FRD, ATLAS full events), found from its bytes, as
// batches of batchEvents. The sources are grouped as the format groups
// them (format.Splitter.Sources, e.g. one group per LHCb bank type). See
// Native for how the events are built. The caller releases the batches.
// Errors: a stream of no known format or of one that does not split, or
// the format's decode errors.
func File(mem memory.Allocator, stream []byte, batchEvents int) ([]arrow.RecordBatch, error) {
	sp, err := splitter(stream)
	if sp == nil {
		return nil, err // an empty stream has no events
	}
	groups, err := sp.Sources(bytes.NewReader(stream))
	if err != nil {
		return nil, err
	}
	return build(mem, sp, stream, groups, batchEvents)
}

// LHCb is File for an LHCb MDF or MEP stream, which it refuses to read as
// any other format: source id = bank type<<16 | LHCb source id
// (lhcb.SourceID), lhcb.HeaderSource carries the MDF header; group
// "bank<type>" per bank type, group "header" for the header source; run
// from the MDF header.
func LHCb(mem memory.Allocator, stream []byte, batchEvents int) ([]arrow.RecordBatch, error) {
	if f := formats.Detect(head(stream)); len(stream) > 0 && f != lhcb.MDFFormat && f != lhcb.MEPFormat {
		return nil, fmt.Errorf("triggertest: not an LHCb MDF or MEP stream (%s)", formatName(f))
	}
	return File(mem, stream, batchEvents)
}

// Release releases every batch.
func Release(batches []arrow.RecordBatch) {
	for _, b := range slices.Clip(batches) {
		b.Release()
	}
}

// Native returns the events of a stream of native sluice fragments or
// multi-fragment packets (schemas.AppendFragment, AppendMFP, back to back,
// any order) as batches of batchEvents, with the sources of groups. Events
// come in the order of their first fragment; a source that sent nothing
// for an event makes it incomplete, a fragment failing its CRC marks its
// event corrupt, a fragment flagged by its source (source error,
// truncated) marks it so, as the builder does. Errors: the decoders'
// *schemas.DecodeError with the stream offset, or a fragment of a source
// outside groups.
func Native(mem memory.Allocator, stream []byte, groups []schemas.SourceGroup, batchEvents int) ([]arrow.RecordBatch, error) {
	sp, err := splitter(stream)
	if sp == nil {
		return nil, err // an empty stream has no events
	}
	if sp != native.FragmentFormat && sp != native.MFPFormat {
		return nil, fmt.Errorf("triggertest: not a native fragment or packet stream (%s)", sp.Name())
	}
	return build(mem, sp, stream, groups, batchEvents)
}

func head(stream []byte) []byte { return stream[:min(len(stream), format.HeadBytes)] }

func formatName(f format.Format) string {
	if f == nil {
		return "no known format"
	}
	return f.Name()
}

// splitter is the format of stream, which must split; nil for an empty
// stream.
func splitter(stream []byte) (format.Splitter, error) {
	if len(stream) == 0 {
		return nil, nil
	}
	f := formats.Detect(head(stream))
	sp, ok := f.(format.Splitter)
	if !ok {
		return nil, fmt.Errorf("triggertest: a stream of %s, which does not split into fragments", formatName(f))
	}
	return sp, nil
}

// build splits stream with sp and builds its events with the sources of
// groups, batchEvents a batch.
func build(mem memory.Allocator, sp format.Splitter, stream []byte, groups []schemas.SourceGroup, batchEvents int) ([]arrow.RecordBatch, error) {
	where := map[uint32][2]int{}
	for gi, g := range groups {
		for k, src := range g.Sources {
			where[src] = [2]int{gi, k}
		}
	}
	var order []uint64
	events := map[uint64]*synthbatch.Event{}
	err := sp.Split(bytes.NewReader(stream), groups, func(p format.Piece) error {
		for _, f := range p.Fragments {
			w, ok := where[f.SourceID]
			if !ok {
				return fmt.Errorf("triggertest: %s stream: a fragment of event %d from source %#x, which no group has", sp.Name(), f.EventID, f.SourceID)
			}
			ev := events[f.EventID]
			if ev == nil {
				ev = &synthbatch.Event{ID: f.EventID, Run: p.Run, Fragments: make([][][]byte, len(groups))}
				for gi, g := range groups {
					ev.Fragments[gi] = make([][]byte, len(g.Sources))
				}
				events[f.EventID] = ev
				order = append(order, f.EventID)
			}
			if !f.CRCValid() {
				ev.Corrupt = append(ev.Corrupt, f.SourceID)
			}
			if f.Flags&(schemas.FlagSourceError|schemas.FlagTruncated) != 0 {
				ev.Status |= schemas.StatusSourceError
			}
			// Payloads alias the splitter's buffers: keep a copy. An empty
			// fragment is present (not missing): a zero-length, non-nil slice.
			ev.Fragments[w[0]][w[1]] = append([]byte{}, f.Payload...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []arrow.RecordBatch
	for done := 0; done < len(order); done += batchEvents {
		var batch []synthbatch.Event
		for _, id := range order[done:min(done+batchEvents, len(order))] {
			batch = append(batch, *events[id])
		}
		rec, err := synthbatch.Build(mem, groups, batch)
		if err != nil {
			Release(out)
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}
