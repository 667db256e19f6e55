package storage

import (
	"fmt"
	"testing"

	"github.com/sluice-daq/sluice/internal/benchratio"
	"github.com/sluice-daq/sluice/schemas"
)

// BenchmarkProvenanceCost: Put with the provenance records (subject)
// against the same store without them (baseline, the store as it was
// before provenance), alternating in the same run, for small (1 kB) and
// demo-sized (100 kB) events in batches of 64, with an fsync per batch
// (the node's default) and without (the CPU cost alone: the fsyncs of a
// shared disk make the first noisy). The verdicts are a two-stage chain's (gec accepted, hlt1
// decided). ratio is the write rate with provenance over without;
// prov_B/event the encoded record (key and value) each event adds. One op
// is one event.
func BenchmarkProvenanceCost(b *testing.B) {
	gec := &schemas.PluginID{Stage: "gec", Name: "gec", Version: "1.0.0", Digest: "9f1c0000000000000000000000000000000000000000000000000000000000aa"}
	hlt1 := &schemas.PluginID{Stage: "hlt1", Name: "passthrough", Version: "1.0.0", Digest: "3e7d0000000000000000000000000000000000000000000000000000000000bb"}
	for _, c := range []struct {
		size int
		sync SyncPolicy
	}{{1_000, SyncEveryBatch}, {100_000, SyncEveryBatch}, {1_000, SyncNever}, {100_000, SyncNever}} {
		size := c.size
		b.Run(fmt.Sprintf("event=%dB/sync=%s", size, c.sync), func(b *testing.B) {
			var ebs []*schemas.EventBatch
			var ms [][]schemas.Verdict
			for k := 0; k < 4; k++ {
				evs := genEvents(1, uint64(k*benchBatch), benchBatch, 1, size*3/4)
				rec := buildBatch(b, nil, evs)
				b.Cleanup(rec.Release)
				eb, _ := newView(b, rec)
				m := metas(evs)
				for i := range m {
					m[i] = schemas.Verdict{Decision: schemas.DecisionAccept, Stage: "hlt1", Plugin: hlt1, Fired: 1, Lines: 1,
						Trail: []schemas.Step{{Plugin: gec, Decision: schemas.DecisionAccept, Fired: 1, Lines: 1}}}
				}
				ebs, ms = append(ebs, eb), append(ms, m)
			}
			open := func(prov bool) *Store {
				s, err := Open(Options{Dir: b.TempDir(), MinFreeBytes: 4 << 30, Sync: c.sync})
				if err != nil {
					b.Fatal(err)
				}
				s.noProvenance = !prov
				b.Cleanup(func() { s.Close() })
				return s
			}
			with, without := open(true), open(false)
			evBytes := len(ebs[0].GroupPayload(0, 0)) + len(ebs[0].GroupPayload(1, 0))
			b.SetBytes(int64(evBytes))
			writer := func(s *Store) func(int) {
				left, next := 0, 0
				return func(ops int) {
					left += ops
					for left >= benchBatch {
						if _, err := s.Put(Accepted, ebs[next%len(ebs)], ms[next%len(ebs)], nil); err != nil {
							b.Fatal(err)
						}
						next++
						left -= benchBatch
					}
				}
			}
			benchratio.Compare(b, writer(with), writer(without))
			var unstored []uint32
			with.plugins.mu.Lock()
			rec := with.plugins.newProvenance(nil, nil, false, uint64(1_800_000_000_000_000_000), &ms[0][0], &unstored)
			with.plugins.mu.Unlock()
			b.ReportMetric(float64(KeySize+len(rec)), "prov_B/event")
			b.ReportMetric(float64(KeySize+encodedSize(ebs[0], 0, &ms[0][0])), "event_B/event")
		})
	}
}
