package builder

import (
	"bytes"
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/schemas"
)

// TestParallelAssembly builds batches large enough to be split among
// several assembly workers, with missing and corrupt sources in rows of
// different workers, and checks every row: its payload bytes, sizes,
// missing and corrupt sources (in source order) and status. The CRCs are
// checked at assembly, on the copied bytes, for fragments added alone and
// in multi-fragment packets.
func TestParallelAssembly(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	groups := []schemas.SourceGroup{{Name: "a", Sources: []uint32{0, 1, 2, 3, 4, 5, 6, 7}}, {Name: "b", Sources: []uint32{100, 101, 102, 103}}}
	const size = 20 << 10 // 12 sources: 240 KiB an event
	const batch = 8
	if w := assemblyWorkers(batch, batch*12*size); w < 4 {
		t.Fatalf("a batch of %d events of %d bytes gets %d workers, want 4 (the test would not split rows)", batch, 12*size, w)
	}
	h := newHarness(t, Config{Groups: groups, Timeout: time.Hour, BatchLatency: time.Hour, BatchEvents: batch}, true)
	rel := newReleases()
	payload := func(src uint32, id uint64) []byte {
		p := make([]byte, size-int(src%3)*100) // sizes differ by source
		for i := range p {
			p[i] = byte(uint64(i)*7 + uint64(src)*13 + id*31)
		}
		return p
	}
	missing := map[uint64][]uint32{3: {2}, 13: {101}, 14: {0, 103}}
	corrupt := map[uint64][]uint32{2: {5}, 7: {3, 100}, 10: {2, 6}, 13: {1}, 16: {7, 102}} // 10: two in one group's row
	const events = 16
	ctx := context.Background()
	for _, g := range groups {
		for _, src := range g.Sources {
			if src < 4 {
				// Sources 0-3: one packet of 8 events each, twice.
				for first := uint64(1); first <= events; first += 8 {
					var pays [][]byte
					var crcs []uint32
					for id := first; id < first+8; id++ {
						p := payload(src, id)
						crc := schemas.Checksum(p)
						if slices.Contains(corrupt[id], src) {
							crc ^= 1
						}
						if slices.Contains(missing[id], src) {
							p = nil // an empty fragment is a present one: skip it below
						}
						pays, crcs = append(pays, p), append(crcs, crc)
					}
					if slices.ContainsFunc(pays, func(p []byte) bool { return p == nil }) {
						// A packet cannot leave a fragment out: send the others alone.
						for i, p := range pays {
							if p != nil {
								mustAdd(t, h.b, schemas.Fragment{SourceID: src, EventID: first + uint64(i), CRC: crcs[i], Payload: p}, rel.next())
							}
						}
						continue
					}
					m, _, err := schemas.DecodeMFP(schemas.AppendMFP(nil, src, first, 0, 0, pays, crcs))
					if err != nil {
						t.Fatal(err)
					}
					if err := h.b.AddPacket(ctx, m, rel.next()); err != nil {
						t.Fatal(err)
					}
				}
				continue
			}
			for id := uint64(1); id <= events; id++ {
				if slices.Contains(missing[id], src) {
					continue
				}
				p := payload(src, id)
				crc := schemas.Checksum(p)
				if slices.Contains(corrupt[id], src) {
					crc ^= 0xdeadbeef
				}
				mustAdd(t, h.b, schemas.Fragment{SourceID: src, EventID: id, CRC: crc, Payload: p}, rel.next())
			}
		}
	}
	rows := h.close()
	rel.check(t)
	if len(rows) != events {
		t.Fatalf("%d events, want %d", len(rows), events)
	}
	slices.SortFunc(rows, func(x, y row) int { return int(x.id) - int(y.id) })
	for i, r := range rows {
		id := uint64(i + 1)
		var st schemas.EventStatus
		if len(missing[id]) > 0 {
			st |= schemas.StatusIncomplete
		}
		if len(corrupt[id]) > 0 {
			st |= schemas.StatusCorrupt
		}
		if r.id != id || r.status != st || !slices.Equal(r.missing, missing[id]) || !slices.Equal(r.corrupt, corrupt[id]) || r.nfrag != 12-len(missing[id]) {
			t.Errorf("row %d: event %d status %v missing %v corrupt %v fragments %d; want event %d status %v missing %v corrupt %v fragments %d",
				i, r.id, r.status, r.missing, r.corrupt, r.nfrag, id, st, missing[id], corrupt[id], 12-len(missing[id]))
		}
		for _, g := range groups {
			for _, src := range g.Sources {
				want := payload(src, id)
				if slices.Contains(missing[id], src) {
					want = nil
				}
				if !bytes.Equal(r.payloads[src], want) || r.sizes[src] != uint32(len(want)) {
					t.Errorf("event %d source %d: %d bytes (size %d), want %d, equal %v", id, src, len(r.payloads[src]), r.sizes[src], len(want), bytes.Equal(r.payloads[src], want))
				}
			}
		}
	}
	l := h.b.Ledger()
	checkBalanced(t, l)
	if l.EventsCorrupt != uint64(len(corrupt)) || l.EventsIncomplete != uint64(len(missing)) {
		t.Errorf("ledger: %d corrupt, %d incomplete events; want %d, %d", l.EventsCorrupt, l.EventsIncomplete, len(corrupt), len(missing))
	}
}
