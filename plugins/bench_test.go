package plugins

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/internal/benchratio"
	"github.com/sluice-daq/sluice/plugins/examples/l0calo/l0"
	"github.com/sluice-daq/sluice/plugins/examples/passthrough/passthrough"
	"github.com/sluice-daq/sluice/plugins/internal/synthbatch"
	"github.com/sluice-daq/sluice/schemas"
)

// quiet drops the plugins' log lines, which would break the benchmark lines
// that scripts/bench.sh reads.
var quiet = slog.New(slog.DiscardHandler)

// BenchmarkPassthrough: the passthrough plugin out of process against the
// same trigger called in process on the same batch, for batches of 1 MiB
// and 64 MiB of payload. "arena": the batch was built in the shared arena
// and travels as the places of its buffers (nothing copied); "copy": the
// batch is on the Go heap and is written once into the instance's region;
// "inline": the batch's IPC stream is carried in the gRPC request.
// Reports bytes/s and events/s of payload through the plugin, the round
// trip per batch, and the ratio (in-process time / out-of-process time).
func BenchmarkPassthrough(b *testing.B) {
	for _, c := range []struct {
		name          string
		events, size  int // events per batch, bytes per source (4 sources)
		arena, inline bool
	}{
		{"1MiB/arena", 64, 4 << 10, true, false},
		{"1MiB/copy", 64, 4 << 10, false, false},
		{"1MiB/inline", 64, 4 << 10, false, true},
		{"64MiB/arena", 256, 64 << 10, true, false},
		{"64MiB/copy", 256, 64 << 10, false, false},
		{"64MiB/inline", 256, 64 << 10, false, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			var mem memory.Allocator = memory.NewGoAllocator()
			opts := Options{Inline: c.inline, Logger: quiet}
			if c.arena {
				arena, err := NewArena(c.events*4*c.size + 16<<20)
				if err != nil {
					b.Fatal(err)
				}
				defer arena.Close()
				mem, opts.Arena = arena, arena
			}
			groups := []schemas.SourceGroup{{Name: "tracker", Sources: []uint32{1, 2, 3, 4}}}
			rec, err := synthbatch.Synthetic(mem, synthbatch.Spec{Events: c.events, Groups: groups, FragmentSize: c.size})
			if err != nil {
				b.Fatal(err)
			}
			defer rec.Release()
			ctx := context.Background()
			p, err := Start(ctx, pluginPath("passthrough"), opts)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			if _, err := p.Decide(ctx, rec); err != nil { // maps the region once
				b.Fatal(err)
			}
			inproc := &passthrough.Trigger{}
			out := make([]schemas.Verdict, c.events)
			b.SetBytes(int64(c.events * 4 * c.size))
			var subject time.Duration
			benchratio.Compare(b, func(n int) {
				t0 := time.Now()
				for range n {
					res, err := p.Decide(ctx, rec)
					if err != nil || res[0].Decision != schemas.DecisionAccept {
						b.Fatal(err)
					}
				}
				subject += time.Since(t0)
			}, func(n int) {
				for range n {
					ev, err := schemas.NewEventBatch(rec)
					if err != nil {
						b.Fatal(err)
					}
					clear(out)
					if err := inproc.Decide(ev, out); err != nil || out[0].Decision != schemas.DecisionAccept {
						b.Fatal(err)
					}
				}
			})
			perBatch := subject.Seconds() / float64(b.N)
			b.ReportMetric(perBatch*1e3, "ms/batch")
			b.ReportMetric(float64(c.events)/perBatch, "events/s")
		})
	}
}

// BenchmarkL0calo: the l0calo example, which reads every calorimeter tower
// and muon candidate, out of process (batch built in the arena) against the
// same trigger in process: 2000 events of 10 sources × 1 KiB (20 MiB of
// payload) per batch. With a trigger that does real work per byte, the
// fixed cost of the process boundary is a small part of the batch's time.
func BenchmarkL0calo(b *testing.B) {
	const events, size = 2000, 1 << 10
	arena, err := NewArena(events*10*size + 16<<20)
	if err != nil {
		b.Fatal(err)
	}
	defer arena.Close()
	rec, err := synthbatch.Synthetic(arena, synthbatch.Spec{Events: events, FragmentSize: size, Seed: 5})
	if err != nil {
		b.Fatal(err)
	}
	defer rec.Release()
	ctx := context.Background()
	p, err := Start(ctx, pluginPath("l0calo"), Options{Arena: arena, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	want, err := p.Decide(ctx, rec)
	if err != nil {
		b.Fatal(err)
	}
	inproc := l0.New()
	out := make([]schemas.Verdict, events)
	b.SetBytes(int64(events * 10 * size))
	var subject time.Duration
	benchratio.Compare(b, func(n int) {
		t0 := time.Now()
		for range n {
			res, err := p.Decide(ctx, rec)
			if err != nil || res[events-1].Decision != want[events-1].Decision || res[events-1].Lines != want[events-1].Lines {
				b.Fatal(err)
			}
		}
		subject += time.Since(t0)
	}, func(n int) {
		for range n {
			ev, err := schemas.NewEventBatch(rec)
			if err != nil {
				b.Fatal(err)
			}
			clear(out)
			if err := inproc.Decide(ev, out); err != nil || out[events-1].Decision != want[events-1].Decision || out[events-1].Lines != want[events-1].Lines {
				b.Fatal(err)
			}
		}
	})
	perBatch := subject.Seconds() / float64(b.N)
	b.ReportMetric(perBatch*1e3, "ms/batch")
	b.ReportMetric(float64(events)/perBatch, "events/s")
}

// BenchmarkShadowOverhead: production throughput of a stage with a shadow
// against the same stage without one, in the same run (the ratio). The
// stage runs the l0calo example (it reads every calorimeter tower and muon
// candidate) on 2 instances, fed by 2 goroutines, batches of 500 events of
// 10 sources × 1 KiB built in the shared arena; the shadow is a second
// l0calo (other parameters) with the default settings (1 instance, queue
// 4, nice 19 under SCHED_IDLE), reading production's batches in the arena.
// Each feeder releases a batch (through its view, as the node's store does
// once it has written it) when it has decided storeLag more: a shadow not
// done with a batch by then has it skipped (released). One op = one batch
// decided by production; the shadow's queue drains between rounds,
// untimed. Reports the fraction of the subject's events the shadow
// compared (the rest it skipped: behind, or the batch released first).
func BenchmarkShadowOverhead(b *testing.B) {
	const events, size, batches, storeLag = 500, 1 << 10, 16, 2
	arena, err := NewArena(batches*events*10*size + 16<<20)
	if err != nil {
		b.Fatal(err)
	}
	defer arena.Close()
	var recs []arrow.RecordBatch
	for k := range batches {
		rec, err := synthbatch.Synthetic(arena, synthbatch.Spec{FirstEventID: uint64(k * events), Events: events, FragmentSize: size, Seed: 5})
		if err != nil {
			b.Fatal(err)
		}
		defer rec.Release()
		recs = append(recs, rec)
	}
	ctx := context.Background()
	chain := func(sh *ShadowConfig) *Chain {
		c, err := NewChain(ctx, Config{Stages: []StageConfig{{Name: "llt", Plugin: pluginPath("l0calo"), Instances: 2, Shadow: sh}},
			Options: Options{Arena: arena, Logger: quiet}})
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	with := chain(&ShadowConfig{Plugin: pluginPath("l0calo"), Params: map[string]string{"ecal_et_mev": "2000"}})
	defer with.Close()
	without := chain(nil)
	defer without.Close()
	run := func(c *Chain) func(n int) {
		return func(n int) {
			var next atomic.Int64
			var wg sync.WaitGroup
			for range 2 {
				wg.Go(func() {
					var held []*schemas.EventBatch // decided, not yet "stored"
					defer func() {
						for _, ev := range held {
							ev.Release()
						}
					}()
					for k := next.Add(1) - 1; k < int64(n); k = next.Add(1) - 1 {
						rec := recs[k%batches]
						rec.Retain()
						ev, err := schemas.NewEventBatch(rec)
						if err != nil {
							rec.Release()
							b.Error(err)
							return
						}
						if _, err := c.Decide(ctx, ev); err != nil {
							ev.Release()
							b.Error(err)
							return
						}
						if held = append(held, ev); len(held) > storeLag {
							held[0].Release()
							held = held[1:]
						}
					}
				})
			}
			wg.Wait()
		}
	}
	// The shadow's queue drains between the rounds, so that its leftover
	// work does not slow the baseline's round.
	settle := func() {
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			st := with.State()[0]
			if st.Shadow.Compared+st.Shadow.SkippedEvents() == st.Seen() {
				return
			}
		}
		b.Fatal("the shadow did not finish its queue in a minute")
	}
	b.SetBytes(events * 10 * size)
	benchratio.CompareSettled(b, run(with), run(without), settle)
	st := with.State()[0]
	if st.Seen() != uint64(b.N*events) {
		b.Fatalf("production saw %d events, want %d", st.Seen(), b.N*events)
	}
	b.ReportMetric(float64(st.Shadow.Compared)/float64(st.Seen()), "shadow_compared_fraction")
	var released uint64
	for _, k := range st.Shadow.Skipped {
		if k.Reason == skipReleased {
			released = k.Events
		}
	}
	b.ReportMetric(float64(released)/float64(st.Seen()), "shadow_released_fraction")
}
