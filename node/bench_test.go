package node

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-daq/sluice/internal/benchratio"
	"github.com/sluice-daq/sluice/node/config"
	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/storage"
)

// loopInput sends events 0..events-1 from prebuilt packets (one per
// source, packing events each), only changing their first event id, so
// that the input costs nothing next to the node.
type loopInput struct {
	packets []schemas.MFP
	events  uint64
	sent    uint64
}

func newLoopInput(sources, packing, size int, events uint64) *loopInput {
	in := &loopInput{events: events}
	payloads := make([][]byte, packing)
	for i := range payloads {
		payloads[i] = make([]byte, size)
		for j := range payloads[i] {
			payloads[i][j] = byte(i*7 + j)
		}
	}
	for s := range sources {
		p, _, err := schemas.DecodeMFP(schemas.AppendMFP(nil, uint32(s), 0, 0, 3, payloads, nil))
		if err != nil {
			panic(err)
		}
		in.packets = append(in.packets, p)
	}
	return in
}

func (in *loopInput) Run(ctx context.Context, sink transport.Sink) error {
	n := uint64(in.packets[0].N)
	for ev := uint64(0); ev < in.events; ev += n {
		for _, p := range in.packets {
			p.FirstEventID = ev
			if err := sink.AddPacket(ctx, p, nil); err != nil {
				return nil
			}
		}
		in.sent = ev + n
	}
	return nil
}

func (in *loopInput) Stats() transport.Stats { return transport.Stats{Packets: in.sent} }
func (in *loopInput) Close() error           { return nil }

// BenchmarkNodePipeline: 100 kB events from 100 sources through the
// builder, the batch queue, an in-process trigger accepting 10 % and the
// store (sync never), against memcpy of the same bytes in fragment-sized
// pieces (the node's one copy). One op = one event. The baseline is that
// copy alone, not a node: each of benchratio.Chunks rounds also starts a
// node (store, goroutines) and drains it, a fixed cost that dominates at
// small b.N (a 1 s benchtime ran ~1.8 MB/s, ratio 0.0003; -benchtime 2000x
// 67 MB/s, ratio 0.011); sluice bench measures the node's steady rate.
func BenchmarkNodePipeline(b *testing.B) {
	const sources, size, packing = 100, 1000, 10
	b.SetBytes(sources * size)
	dst := make([]byte, 64<<20)
	src := make([]byte, 64<<20)
	copy(dst, src)
	benchratio.Compare(b, func(ops int) {
		events := uint64((ops + packing - 1) / packing * packing)
		cfg := config.Default()
		cfg.Inputs = []config.Input{{URI: "shm://bench"}}
		cfg.Sources = []config.SourceGroup{{Name: "tracker", Sources: "0-99"}}
		cfg.Builder.BatchEvents = 64
		cfg.Store.Dir = filepath.Join(b.TempDir(), "store")
		cfg.Store.Sync = storage.SyncNever
		cfg.Store.MinFreeBytes = 64 << 20
		cfg.HTTP.Address = "off"
		parts := &Parts{Inputs: []transport.Input{newLoopInput(sources, packing, size, events)}, Finite: []bool{true}, Chain: &fakeChain{}}
		n, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler),
			Open: func(_ context.Context, cfg *config.Config, reg prometheus.Registerer, _ *slog.Logger) (*Parts, error) {
				st, err := OpenStore(cfg, reg)
				parts.Store = st
				return parts, err
			}})
		if err != nil {
			b.Fatal(err)
		}
		l, err := n.Run(context.Background())
		if err != nil || l.EventsBuilt != events {
			b.Fatalf("run: %v, %d events built of %d", err, l.EventsBuilt, events)
		}
	}, func(ops int) {
		off := 0
		for range ops * sources {
			// Invariant: off+size <= len(dst).
			if off+size > len(dst) {
				off = 0
			}
			copy(dst[off:off+size], src[off:off+size])
			off += size
		}
	})
}
