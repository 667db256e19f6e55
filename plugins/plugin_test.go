package plugins

import (
	"context"
	"os"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/plugins/internal/pluginpb"
	"github.com/sluice-daq/sluice/plugins/internal/synthbatch"
	"github.com/sluice-daq/sluice/schemas"
)

// TestPassthroughRoundTrip runs the passthrough plugin out of process over
// both transports and checks every decision.
func TestPassthroughRoundTrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec, err := synthbatch.Synthetic(mem, synthbatch.Spec{FirstEventID: 1000, Events: 300})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	for _, inline := range []bool{false, true} {
		ctx := context.Background()
		p, err := Start(ctx, pluginPath("passthrough"), Options{Inline: inline, Allocator: mem})
		if err != nil {
			t.Fatal(err)
		}
		d := p.Description()
		if d.Name != "passthrough" || len(d.Lines) != 1 || d.Lines[0] != "all" {
			t.Fatalf("description %+v", d)
		}
		if err := p.Configure(ctx, map[string]string{"prescale": "3"}); err != nil {
			t.Fatal(err)
		}
		res, err := p.Decide(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 300 {
			t.Fatalf("%d results for 300 events", len(res))
		}
		for i, r := range res {
			id := 1000 + uint64(i)
			want := schemas.DecisionReject
			if id%3 == 0 {
				want = schemas.DecisionAccept
			}
			if r.Decision != want || (want == schemas.DecisionAccept) != (r.Lines == 1) {
				t.Fatalf("inline=%v event %d: %v lines %b, want %v", inline, id, r.Decision, r.Lines, want)
			}
		}
		if err := p.Configure(ctx, map[string]string{"prescal": "3"}); err == nil {
			t.Fatal("misspelt parameter accepted")
		}
		p.Close()
	}
}

// TestProtocolNegotiated: the host settles on handshake version 2 with a
// plugin built with the SDK and sends it CallsInFlight calls at once when
// batches are in an arena; a plugin that speaks only version 1 gets version
// 1 and one call at a time, and still decides.
func TestProtocolNegotiated(t *testing.T) {
	arena, err := NewArena(16 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer arena.Close()
	ctx := context.Background()
	for _, c := range []struct {
		plugin       string
		proto, depth int
	}{
		{"passthrough", ProtocolPipelined, CallsInFlight},
		{"v1only", ProtocolVersion, 1},
	} {
		p, err := Start(ctx, pluginPath(c.plugin), Options{Arena: arena, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if p.Protocol() != c.proto || p.in.depth != c.depth {
			t.Errorf("%s: handshake version %d, %d calls in flight; want %d, %d", c.plugin, p.Protocol(), p.in.depth, c.proto, c.depth)
		}
		p.Close()
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec, err := synthbatch.Synthetic(mem, synthbatch.Spec{Events: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	p, err := Start(ctx, pluginPath("v1only"), Options{Inline: true, Allocator: mem, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	res, err := p.Decide(ctx, rec)
	if err != nil || len(res) != 10 || res[9].Decision != schemas.DecisionAccept {
		t.Fatalf("v1only decided %v, %v", res, err)
	}
}

// TestPluginOneProcessor: a plugin built with the SDK runs with GOMAXPROCS
// 1 (it decides one batch at a time on the node's cores) unless the
// environment it inherits from the node sets GOMAXPROCS.
func TestPluginOneProcessor(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec, err := synthbatch.Synthetic(mem, synthbatch.Spec{Events: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	reason := func() string {
		ctx := context.Background()
		p, err := Start(ctx, pluginPath("procs"), Options{Allocator: mem, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		res, err := p.Decide(ctx, rec)
		if err != nil || len(res) != 3 {
			t.Fatalf("decided %v, %v", res, err)
		}
		return res[2].Reason.Text
	}
	t.Setenv("GOMAXPROCS", "3")
	if got := reason(); got != "GOMAXPROCS=3" {
		t.Errorf("with GOMAXPROCS=3 in the environment the plugin says %q", got)
	}
	os.Unsetenv("GOMAXPROCS") // t.Setenv restores it after the test
	if got := reason(); got != "GOMAXPROCS=1" {
		t.Errorf("without GOMAXPROCS in the environment the plugin says %q, want GOMAXPROCS=1", got)
	}
}

// TestLargeInlineBatch sends a 64 MiB batch inside the gRPC request: the
// message limits are raised on both sides.
func TestLargeInlineBatch(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	// 256 events × 4 sources × 64 KiB = 64 MiB of payload.
	groups := []schemas.SourceGroup{{Name: "tracker", Sources: []uint32{1, 2, 3, 4}}}
	rec, err := synthbatch.Synthetic(mem, synthbatch.Spec{Events: 256, Groups: groups, FragmentSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	ctx := context.Background()
	p, err := Start(ctx, pluginPath("passthrough"), Options{Inline: true, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	res, err := p.Decide(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Decision != schemas.DecisionAccept {
			t.Fatalf("row %d: %v", i, r.Decision)
		}
	}
	if len(res) != 256 {
		t.Fatalf("%d results", len(res))
	}
}

// TestArenaRoundTrip: a batch built in the arena goes to the plugin as the
// places of its buffers (no copy); a heap batch goes through the instance's
// region; both are decided alike. A two-stage chain on the arena also sends
// the second stage's selected events by layout.
func TestArenaRoundTrip(t *testing.T) {
	arena, err := NewArena(16 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer arena.Close()
	mem := memory.NewCheckedAllocator(arena)
	defer mem.AssertSize(t, 0)
	rec, err := synthbatch.Synthetic(mem, synthbatch.Spec{FirstEventID: 1, Events: 500, FragmentSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	heap, err := synthbatch.Synthetic(memory.NewGoAllocator(), synthbatch.Spec{FirstEventID: 1, Events: 500, FragmentSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer heap.Release()
	ctx := context.Background()
	p, err := Start(ctx, pluginPath("l0calo"), Options{Arena: arena})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	req := &pluginpb.DecideRequest{}
	if by, err := p.in.place(rec, req); err != nil || req.GetLayout() == nil || by != transportLayout {
		t.Fatalf("arena batch not sent by layout (%s, %v)", by, err)
	}
	if by, err := p.in.place(heap, req); err != nil || req.GetShared() == nil || by != transportRegion {
		t.Fatalf("heap batch not sent through the region (%s, %v)", by, err)
	}
	a, err := p.Decide(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Decide(ctx, heap)
	if err != nil {
		t.Fatal(err)
	}
	accepted := 0
	for i := range a {
		if !reflect.DeepEqual(a[i], b[i]) {
			t.Fatalf("row %d: %+v by layout, %+v by copy", i, a[i], b[i])
		}
		if a[i].Decision == schemas.DecisionAccept {
			accepted++
		}
	}
	if accepted == 0 || accepted == len(a) {
		t.Fatalf("%d of %d accepted", accepted, len(a))
	}

	c, err := NewChain(ctx, Config{Stages: []StageConfig{
		{Name: "llt", Plugin: pluginPath("l0calo")},
		{Name: "hlt", Plugin: pluginPath("passthrough"), Params: map[string]string{"prescale": "2"}},
	}, Options: Options{Arena: arena}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := decideRec(ctx, c, rec)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		want := a[i].Decision == schemas.DecisionAccept && (uint64(i)+1)%2 == 0
		if want != (r.Decision == schemas.DecisionAccept) {
			t.Fatalf("row %d: %+v", i, r)
		}
	}
	if free := arena.FreeBytes(); free >= 16<<20 {
		t.Fatalf("arena reports %d free bytes with a batch in it", free)
	}
}
