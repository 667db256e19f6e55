package lhcb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/sluice-daq/sluice/builder"
	"github.com/sluice-daq/sluice/internal/buildtest"
	"github.com/sluice-daq/sluice/schemas"
)

// joined is one built event turned back into an MDF record.
type joined struct {
	id      uint64
	status  schemas.EventStatus
	missing []uint32
	record  []byte
	err     error
}

// groupsByType puts the header source in group "header" and the bank
// sources of each bank type in group "type<N>", as a deployment would put
// each sub-detector in its own payload column.
func groupsByType(sources []uint32) []schemas.SourceGroup {
	var groups []schemas.SourceGroup
	at := map[string]int{}
	for _, id := range sources {
		name := "header"
		if typ, _, ok := SplitSourceID(id); ok {
			name = fmt.Sprintf("type%d", typ)
		}
		g, ok := at[name]
		if !ok {
			g = len(groups)
			at[name] = g
			groups = append(groups, schemas.SourceGroup{Name: name})
		}
		groups[g].Sources = append(groups[g].Sources, id)
	}
	return groups
}

// buildAndJoin runs a builder expecting sources on a checked allocator,
// lets feed hand it fragments, closes it and joins every built event back
// into an MDF record.
func buildAndJoin(t *testing.T, sources []uint32, feed func(ctx context.Context, b *builder.Builder)) ([]joined, builder.Ledger) {
	t.Helper()
	var out []joined
	j := NewJoiner()
	cfg := builder.Config{Groups: groupsByType(sources), Run: sampleRun, BatchEvents: 3}
	led := buildtest.Run(t, cfg, feed, func(eb *schemas.EventBatch, i int) {
		r, err := j.Join(nil, eb, i)
		out = append(out, joined{id: eb.EventID(i), status: eb.Status(i), missing: append([]uint32(nil), eb.MissingSources(i)...), record: r, err: err})
	})
	return out, led
}

// originals returns the sample's records by ODIN event number, copied.
func originals(t *testing.T, data []byte) map[uint64][]byte {
	t.Helper()
	byID := map[uint64][]byte{}
	if err := ForEachEvent(bytes.NewReader(data), func(ev *Event) error {
		byID[6001+ev.Index] = bytes.Clone(ev.Record.Stored)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return byID
}

// checkJoined is the proof: every event came back with the same
// header fields (run, orbit, bunch, trigger mask) and the same raw banks
// (type, version, source id, payload) in the original order; the joined
// file has valid checksums and the Reader reads it back. As the splitter
// carries the bank order and the whole header, the joined record is even
// the original record byte for byte.
func checkJoined(t *testing.T, out []joined, want map[uint64][]byte) {
	t.Helper()
	if len(out) != len(want) {
		t.Fatalf("%d events built, want %d", len(out), len(want))
	}
	var file []byte
	for _, j := range out {
		if j.err != nil || j.status != 0 {
			t.Fatalf("event %d: status %b, join error %v", j.id, j.status, j.err)
		}
		file = append(file, j.record...)
	}
	r := NewReader(bytes.NewReader(file)) // ChecksumVerify
	n := 0
	for ; ; n++ {
		got, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if got.Checksum != ChecksumValid {
			t.Fatalf("joined record %d: checksum %v", n, got.Checksum)
		}
		orig, _, err := DecodeRecord(want[out[n].id])
		if err != nil {
			t.Fatal(err)
		}
		gh, oh := got.Header, orig.Header
		if gh.Run != oh.Run || gh.Orbit != oh.Orbit || gh.Bunch != oh.Bunch || gh.TriggerMask != oh.TriggerMask || gh.Version != oh.Version || gh.DataType != oh.DataType {
			t.Fatalf("event %d: header %+v, want %+v", out[n].id, gh, oh)
		}
		gb, err := AppendBanks(nil, got.Body)
		if err != nil {
			t.Fatal(err)
		}
		ob, _ := AppendBanks(nil, orig.Body)
		if len(gb) != len(ob) {
			t.Fatalf("event %d: %d banks, want %d", out[n].id, len(gb), len(ob))
		}
		for k := range gb {
			if gb[k].Type != ob[k].Type || gb[k].Version != ob[k].Version || gb[k].SourceID != ob[k].SourceID || !bytes.Equal(gb[k].Data, ob[k].Data) {
				t.Fatalf("event %d bank %d: type %d v%d source %d (%d bytes), want type %d v%d source %d (%d bytes)", out[n].id, k,
					gb[k].Type, gb[k].Version, gb[k].SourceID, len(gb[k].Data), ob[k].Type, ob[k].Version, ob[k].SourceID, len(ob[k].Data))
			}
		}
		if !bytes.Equal(got.Stored, orig.Stored) {
			t.Fatalf("event %d: joined record differs from the original record", out[n].id)
		}
	}
	if n != len(want) {
		t.Fatalf("read back %d records, want %d", n, len(want))
	}
}

func checkLedger(t *testing.T, l builder.Ledger, fragments, events uint64) {
	t.Helper()
	if !l.Balanced() || l.Discards() != 0 || l.FragmentsIn != fragments || l.EventsBuilt != events || l.EventsComplete != events {
		t.Fatalf("ledger %+v, want %d fragments in %d complete events, balanced, no discards", l, fragments, events)
	}
}

// TestRoundTripFragments: sample MDF -> split -> native fragments on the
// wire in shuffled arrival order -> builder -> joiner -> MDF.
func TestRoundTripFragments(t *testing.T) {
	data := readFile(t, mdfSample)
	sources, err := ScanSources(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(sources) != sampleSources+1 || sources[len(sources)-1] != HeaderSource {
		t.Fatalf("%d sources, want %d and the header source last", len(sources), sampleSources+1)
	}
	sp, err := NewSplitter(sources)
	if err != nil {
		t.Fatal(err)
	}
	var (
		wire  [][]byte
		frags []schemas.Fragment
	)
	if err := ForEachEvent(bytes.NewReader(data), func(ev *Event) error {
		frags, err = sp.Split(frags[:0], &ev.Header, ev.Body, ev.Index)
		if err != nil {
			return err
		}
		if len(frags) != len(sources) || frags[0].EventID != 6001+ev.Index {
			t.Fatalf("event %d: %d fragments, event id %d", ev.Index, len(frags), frags[0].EventID)
		}
		for i := range frags {
			wire = append(wire, schemas.AppendFragment(nil, &frags[i], false))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	rng.Shuffle(len(wire), func(i, j int) { wire[i], wire[j] = wire[j], wire[i] })
	out, l := buildAndJoin(t, sources, func(ctx context.Context, b *builder.Builder) {
		for _, w := range wire {
			f, _, err := schemas.DecodeFragment(w)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.AddFragment(ctx, f, nil); err != nil {
				t.Fatal(err)
			}
		}
	})
	checkLedger(t, l, uint64(len(wire)), sampleRecords)
	checkJoined(t, out, originals(t, data))
}

// TestRoundTripMFPs: the same through per-source native MFPs of packing
// factor 4 (packets of 4, 4 and 2 events), in shuffled order.
func TestRoundTripMFPs(t *testing.T) {
	data := readFile(t, mdfSample)
	var packets [][]byte
	sources, err := WriteMFPs(bytes.NewReader(data), nil, 4, 3, func(p []byte) error {
		packets = append(packets, bytes.Clone(p))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(packets) != 3*len(sources) {
		t.Fatalf("%d packets for %d sources, want 3 per source", len(packets), len(sources))
	}
	rand.New(rand.NewPCG(4, 4)).Shuffle(len(packets), func(i, j int) { packets[i], packets[j] = packets[j], packets[i] })
	out, l := buildAndJoin(t, sources, func(ctx context.Context, b *builder.Builder) {
		for _, p := range packets {
			m, _, err := schemas.DecodeMFP(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.AddPacket(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		}
	})
	checkLedger(t, l, uint64(len(sources))*sampleRecords, sampleRecords)
	checkJoined(t, out, originals(t, data))
}

// TestRoundTripMEP: the MEP sample's 10 events -> per-source MFPs of
// packing factor 10 -> builder -> joiner: every event comes back as an MDF
// record holding the transposed banks of that event.
func TestRoundTripMEP(t *testing.T) {
	data := readFile(t, mepSample)
	_, body := mepBody(t)
	m, err := DecodeMEP(body)
	if err != nil {
		t.Fatal(err)
	}
	var packets [][]byte
	sources, err := WriteMFPs(bytes.NewReader(data), nil, 10, 0, func(p []byte) error {
		packets = append(packets, bytes.Clone(p))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(packets) != len(sources) || len(sources) != 1241+1 {
		t.Fatalf("%d packets, %d sources", len(packets), len(sources))
	}
	rand.New(rand.NewPCG(5, 5)).Shuffle(len(packets), func(i, j int) { packets[i], packets[j] = packets[j], packets[i] })
	out, l := buildAndJoin(t, sources, func(ctx context.Context, b *builder.Builder) {
		for _, p := range packets {
			mfp, _, err := schemas.DecodeMFP(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.AddPacket(ctx, mfp, nil); err != nil {
				t.Fatal(err)
			}
		}
	})
	checkLedger(t, l, uint64(len(sources))*10, 10)
	for _, j := range out {
		if j.err != nil {
			t.Fatalf("event %d: %v", j.id, j.err)
		}
		rec, _, err := DecodeRecord(j.record)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AppendBanks(nil, rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		want := m.Event(int(j.id-6001), nil)
		if len(got) != len(want) || rec.Header.DataType != DataTypeBanks {
			t.Fatalf("event %d: %d banks, want %d; data type %d", j.id, len(got), len(want), rec.Header.DataType)
		}
		for k := range got {
			if got[k].Type != want[k].Type || got[k].SourceID != want[k].SourceID || got[k].Version != want[k].Version || !bytes.Equal(got[k].Data, want[k].Data) {
				t.Fatalf("event %d bank %d differs", j.id, k)
			}
		}
	}
}

// TestTriggerMaskOf pins the MDF trigger mask written for a stored
// verdict (the package doc's table, the README's): words 0-1 the deciding
// stage's fired lines, word 2 the decision, word 3 zero.
func TestTriggerMaskOf(t *testing.T) {
	for _, c := range []struct {
		v    schemas.Verdict
		want [4]uint32
	}{
		{schemas.Verdict{Decision: schemas.DecisionAccept, Lines: 1}, [4]uint32{1, 0, 1, 0}},
		{schemas.Verdict{Decision: schemas.DecisionAccept, Lines: 1 | 1<<33}, [4]uint32{1, 2, 1, 0}},
		{schemas.Verdict{Decision: schemas.DecisionAccept, Lines: 1<<31 | 1<<63}, [4]uint32{0x80000000, 0x80000000, 1, 0}},
		{schemas.Verdict{Decision: schemas.DecisionReject}, [4]uint32{0, 0, 2, 0}},
		{schemas.Verdict{Decision: schemas.DecisionDefer}, [4]uint32{0, 0, 3, 0}},
	} {
		if got := TriggerMaskOf(c.v); got != c.want {
			t.Errorf("%+v: mask %#x, want %#x", c.v, got, c.want)
		}
	}
}
