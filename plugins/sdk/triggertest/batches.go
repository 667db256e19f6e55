package triggertest

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/plugins/internal/synthbatch"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/lhcb"
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

// LHCb returns the events of an LHCb MDF or MEP stream as batches of
// batchEvents, split into sources by schemas/lhcb's splitter (source id =
// bank type<<16 | LHCb source id; lhcb.HeaderSource carries the MDF
// header). Sources are grouped by bank type, group "bank<type>"; the header
// source is group "header". The caller releases the batches.
func LHCb(mem memory.Allocator, stream []byte, batchEvents int) ([]arrow.RecordBatch, error) {
	sources, err := lhcb.ScanSources(bytes.NewReader(stream))
	if err != nil {
		return nil, err
	}
	sp, err := lhcb.NewSplitter(sources)
	if err != nil {
		return nil, err
	}
	// One group per bank type, in ascending type (sources are ascending).
	var groups []schemas.SourceGroup
	where := map[uint32][2]int{}
	for _, id := range sp.Sources() {
		name := "header"
		if typ, _, ok := lhcb.SplitSourceID(id); ok {
			name = fmt.Sprintf("bank%d", typ)
		}
		if len(groups) == 0 || groups[len(groups)-1].Name != name {
			groups = append(groups, schemas.SourceGroup{Name: name})
		}
		g := &groups[len(groups)-1]
		where[id] = [2]int{len(groups) - 1, len(g.Sources)}
		g.Sources = append(g.Sources, id)
	}
	var out []arrow.RecordBatch
	var events []synthbatch.Event
	flush := func() error {
		if len(events) == 0 {
			return nil
		}
		rec, err := synthbatch.Build(mem, groups, events)
		if err != nil {
			return err
		}
		out = append(out, rec)
		events = events[:0]
		return nil
	}
	var frags []schemas.Fragment
	err = lhcb.ForEachEvent(bytes.NewReader(stream), func(ev *lhcb.Event) error {
		if frags, err = sp.Split(frags[:0], &ev.Header, ev.Body, ev.Index); err != nil {
			return err
		}
		e := synthbatch.Event{Fragments: make([][][]byte, len(groups))}
		for gi, g := range groups {
			e.Fragments[gi] = make([][]byte, len(g.Sources))
		}
		for _, f := range frags {
			w := where[f.SourceID]
			// Payloads alias the splitter's buffers: keep a copy. An empty
			// fragment is present (not missing): a zero-length, non-nil slice.
			e.Fragments[w[0]][w[1]] = append([]byte{}, f.Payload...)
			e.ID = f.EventID
		}
		e.Run = ev.Header.Run
		events = append(events, e)
		if len(events) == batchEvents {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		Release(out)
		return nil, err
	}
	return out, nil
}

// Release releases every batch.
func Release(batches []arrow.RecordBatch) {
	for _, b := range slices.Clip(batches) {
		b.Release()
	}
}

// Native returns the events of a stream of native sluice fragments
// (schemas.AppendFragment, back to back, any order) as batches of
// batchEvents, in order of each event's first fragment, with the sources of
// groups. A source that sent nothing for an event makes it incomplete; a
// fragment failing its CRC marks its event corrupt. Errors: the fragment
// decoder's *schemas.DecodeError with the stream offset, or a fragment of a
// source outside groups.
func Native(mem memory.Allocator, stream []byte, groups []schemas.SourceGroup, batchEvents int) ([]arrow.RecordBatch, error) {
	where := map[uint32][2]int{}
	for gi, g := range groups {
		for k, src := range g.Sources {
			where[src] = [2]int{gi, k}
		}
	}
	var order []uint64
	events := map[uint64]*synthbatch.Event{}
	for off := 0; off < len(stream); {
		f, n, err := schemas.DecodeFragment(stream[off:])
		if err != nil {
			return nil, schemas.WithOffset(err, int64(off))
		}
		w, ok := where[f.SourceID]
		if !ok {
			return nil, fmt.Errorf("native stream: fragment at byte %d from source %#x, which no group has", off, f.SourceID)
		}
		ev := events[f.EventID]
		if ev == nil {
			ev = &synthbatch.Event{ID: f.EventID, Fragments: make([][][]byte, len(groups))}
			for gi, g := range groups {
				ev.Fragments[gi] = make([][]byte, len(g.Sources))
			}
			events[f.EventID] = ev
			order = append(order, f.EventID)
		}
		if !f.CRCValid() {
			ev.Corrupt = append(ev.Corrupt, f.SourceID)
		}
		ev.Fragments[w[0]][w[1]] = append([]byte{}, f.Payload...)
		off += n
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
