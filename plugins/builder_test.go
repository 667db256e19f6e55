package plugins_test

import (
	"bytes"
	"context"
	"os"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-daq/sluice/builder"
	"github.com/sluice-daq/sluice/internal/synth"
	"github.com/sluice-daq/sluice/plugins"
	"github.com/sluice-daq/sluice/plugins/examples/l0calo/l0"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/lhcb"
)

// buildAndDecide feeds fragments to the event builder, whose batches (built
// with mem, an arena) go through the chain as they come; it returns the
// chain's result and inproc's result for every event, by event id.
func buildAndDecide(t *testing.T, mem memory.Allocator, groups []schemas.SourceGroup, c *plugins.Chain,
	feed func(add func(schemas.Fragment)), inproc func(*schemas.EventBatch) []schemas.Verdict) (map[uint64]schemas.Verdict, map[uint64]schemas.Verdict) {
	t.Helper()
	ctx := context.Background()
	b, err := builder.New(builder.Config{Groups: groups, Run: 42, BatchEvents: 100, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	got, want := map[uint64]schemas.Verdict{}, map[uint64]schemas.Verdict{}
	var wg sync.WaitGroup
	wg.Go(func() {
		for rec := range b.Batches() {
			decideBatch(t, c, rec, got, want, inproc)
			rec.Release()
		}
	})
	feed(func(f schemas.Fragment) {
		if err := b.AddFragment(ctx, f, nil); err != nil {
			t.Error(err)
		}
	})
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if l := b.Ledger(); !l.Balanced() || l.EventsComplete != uint64(len(got)) {
		t.Fatalf("builder ledger %+v, %d events decided", l, len(got))
	}
	return got, want
}

func decideBatch(t *testing.T, c *plugins.Chain, rec arrow.RecordBatch, got map[uint64]schemas.Verdict, want map[uint64]schemas.Verdict, inproc func(*schemas.EventBatch) []schemas.Verdict) {
	res, err := plugins.DecideRec(context.Background(), c, rec)
	if err != nil {
		t.Error(err)
		return
	}
	ev, err := schemas.NewEventBatch(rec)
	if err != nil {
		t.Error(err)
		return
	}
	exp := inproc(ev)
	for i, r := range res {
		got[ev.EventID(i)] = r
		want[ev.EventID(i)] = exp[i]
	}
}

// TestBuilderToL0calo: emulated fragments → event builder (batches built in
// the shared arena) → l0calo out of process; the decisions equal l0calo's
// in process on the same batches.
func TestBuilderToL0calo(t *testing.T) {
	arena, err := plugins.NewArena(32 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer arena.Close()
	reg := prometheus.NewRegistry()
	c, err := plugins.NewChain(context.Background(), plugins.Config{Stages: []plugins.StageConfig{
		{Name: "llt", Plugin: plugins.PluginPath("l0calo"), Instances: 2},
	}, Options: plugins.Options{Arena: arena}, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	groups := synth.DefaultGroups()
	const events = 2000
	tr := l0.New()
	// The builder writes every byte it allocates: no need to clear memory.
	got, want := buildAndDecide(t, arena.Unzeroed(), groups, c, func(add func(schemas.Fragment)) {
		for id := uint64(0); id < events; id++ {
			for _, g := range groups {
				for _, src := range g.Sources {
					p := synth.Append(nil, synth.KindOf(g.Name), 9, id, src, 64)
					add(schemas.Fragment{SourceID: src, EventID: id, Payload: p, CRC: schemas.Checksum(p)})
				}
			}
		}
	}, func(ev *schemas.EventBatch) []schemas.Verdict {
		out := make([]schemas.Verdict, ev.Len())
		if err := tr.Decide(ev, out); err != nil {
			t.Error(err)
		}
		return out
	})
	if len(got) != events {
		t.Fatalf("%d of %d events decided", len(got), events)
	}
	accepted := 0
	for id, r := range got {
		if r.Decision != want[id].Decision || r.Lines != want[id].Lines || r.Stage != "llt" {
			t.Fatalf("event %d: %+v, in process %+v", id, r, want[id])
		}
		if r.Decision == schemas.DecisionAccept {
			accepted++
		}
	}
	if accepted == 0 {
		t.Fatal("nothing accepted")
	}
	// Every batch reached the plugin without a copy.
	fams, _ := reg.Gather()
	for _, f := range fams {
		if f.GetName() == "sluice_trigger_transport_batches_total" {
			for _, m := range f.GetMetric() {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == "transport" && lp.GetValue() != "layout" && m.GetCounter().GetValue() != 0 {
						t.Fatalf("%v batches sent by %s", m.GetCounter().GetValue(), lp.GetValue())
					}
				}
			}
		}
	}
	if arena.FreeBytes() != 32<<20 {
		t.Fatalf("arena holds %d bytes after every batch was released", 32<<20-arena.FreeBytes())
	}
}

// TestBuilderToGEC: the LHCb MDF sample split by schemas/lhcb's splitter →
// event builder → gec out of process: the four quiet events are accepted.
func TestBuilderToGEC(t *testing.T) {
	data, err := os.ReadFile("../testdata/third_party/lhcb/MiniBrunel_2018_MinBias_FTv4_DIGI_retinacluster_v1.mdf")
	if err != nil {
		t.Fatal(err)
	}
	sources, err := lhcb.ScanSources(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	sp, err := lhcb.NewSplitter(sources)
	if err != nil {
		t.Fatal(err)
	}
	arena, err := plugins.NewArena(16 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer arena.Close()
	c, err := plugins.NewChain(context.Background(), plugins.Config{Stages: []plugins.StageConfig{
		{Name: "gec", Plugin: plugins.PluginPath("gec"), Params: map[string]string{"max_bytes": "15000"}},
	}, Options: plugins.Options{Arena: arena}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	groups := []schemas.SourceGroup{{Name: "lhcb", Sources: sp.Sources()}}
	got, _ := buildAndDecide(t, arena, groups, c, func(add func(schemas.Fragment)) {
		var frags []schemas.Fragment
		err := lhcb.ForEachEvent(bytes.NewReader(data), func(ev *lhcb.Event) error {
			var err error
			if frags, err = sp.Split(frags[:0], &ev.Header, ev.Body, ev.Index); err != nil {
				return err
			}
			for _, f := range frags {
				f.Payload = bytes.Clone(f.Payload) // the splitter reuses its buffers
				add(f)
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	}, func(ev *schemas.EventBatch) []schemas.Verdict { return make([]schemas.Verdict, ev.Len()) })
	quiet := map[uint64]bool{6002: true, 6003: true, 6004: true, 6006: true}
	if len(got) != 10 {
		t.Fatalf("%d events decided", len(got))
	}
	for id, r := range got {
		if quiet[id] != (r.Decision == schemas.DecisionAccept) {
			t.Errorf("event %d: %+v", id, r)
		}
	}
}
