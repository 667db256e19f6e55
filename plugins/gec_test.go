package plugins_test

import (
	"context"
	"os"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/plugins"
	"github.com/sluice-daq/sluice/plugins/examples/gec/gec"
	"github.com/sluice-daq/sluice/plugins/sdk/triggertest"
	"github.com/sluice-daq/sluice/schemas"
)

// TestGECOnRealMDF runs gec out of process on the LHCb sample and compares
// with the same trigger in process (shadow mode): no event differs.
func TestGECOnRealMDF(t *testing.T) {
	data, err := os.ReadFile("../testdata/third_party/lhcb/MiniBrunel_2018_MinBias_FTv4_DIGI_retinacluster_v1.mdf")
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	batches, err := triggertest.LHCb(mem, data, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer triggertest.Release(batches)
	params := map[string]string{"max_bytes": "15000"}
	c, err := plugins.NewChain(context.Background(), plugins.Config{Stages: []plugins.StageConfig{
		{Name: "gec", Plugin: plugins.PluginPath("gec"), Params: params},
	}, Options: plugins.Options{Allocator: mem}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := map[uint64]schemas.Verdict{}
	for _, rec := range batches {
		res, err := plugins.DecideRec(context.Background(), c, rec)
		if err != nil {
			t.Fatal(err)
		}
		ev, _ := schemas.NewEventBatch(rec)
		for i, r := range res {
			got[ev.EventID(i)] = r
		}
	}
	quiet := map[uint64]bool{6002: true, 6003: true, 6004: true, 6006: true}
	if len(got) != 10 {
		t.Fatalf("%d events", len(got))
	}
	for id, r := range got {
		if quiet[id] != (r.Decision == schemas.DecisionAccept) || (quiet[id] && r.Lines != 1<<gec.LineQuiet) {
			t.Errorf("event %d: %+v", id, r)
		}
	}
	// Shadow mode: the binary against the in-process trigger, and against a
	// candidate with a tighter cut, which differs exactly on 6003 and 6004.
	ctx := context.Background()
	bin, err := triggertest.Binary(ctx, plugins.PluginPath("gec"), params, plugins.Options{Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer bin.Close()
	inproc, _ := triggertest.InProcess(gec.New(), params)
	if d, err := triggertest.Shadow(ctx, bin, inproc, batches); err != nil || len(d) != 0 {
		t.Fatalf("binary and in-process gec differ on %v (%v)", d, err)
	}
	tight, _ := triggertest.InProcess(gec.New(), map[string]string{"max_bytes": "11000"})
	d, err := triggertest.Shadow(ctx, bin, tight, batches)
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != 2 || d[0].EventID != 6003 || d[1].EventID != 6004 || d[0].B.Decision != schemas.DecisionReject {
		t.Fatalf("shadow differences %+v, want events 6003 and 6004", d)
	}
}
