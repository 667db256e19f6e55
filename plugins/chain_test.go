package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/sluice-daq/sluice/plugins/examples/l0calo/l0"
	"github.com/sluice-daq/sluice/plugins/sdk"
	"github.com/sluice-daq/sluice/schemas"
)

// inProcessL0 returns l0calo's decisions computed in this process.
func inProcessL0(t *testing.T, batches []arrow.RecordBatch) map[uint64]schemas.Verdict {
	t.Helper()
	tr := l0.New()
	out := map[uint64]schemas.Verdict{}
	for _, rec := range batches {
		ev, err := schemas.NewEventBatch(rec)
		if err != nil {
			t.Fatal(err)
		}
		res := make([]schemas.Verdict, ev.Len())
		if err := tr.Decide(ev, res); err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			out[ev.EventID(i)] = r
		}
	}
	return out
}

// TestChainTwoStages runs l0calo (two instances) then passthrough with its
// own prescale of 2: an event is accepted when l0calo accepts it and its id
// is even; rejects name the stage that rejected.
func TestChainTwoStages(t *testing.T) {
	mem := checkedMem(t)
	batches := synthetic(t, mem, 0, 3000, 250, 64)
	reg := prometheus.NewPedanticRegistry()
	log, logs := testLogger()
	c, err := NewChain(context.Background(), Config{
		Stages: []StageConfig{
			{Name: "llt", Plugin: pluginPath("l0calo"), Instances: 2},
			{Name: "hlt", Plugin: pluginPath("passthrough"), Params: map[string]string{"prescale": "2"}},
		},
		Options:    Options{Logger: log, Allocator: mem},
		Registerer: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	got := runChain(t, c, batches)
	running := c.State()
	c.Close()
	want := inProcessL0(t, batches)
	lltDigest, hltDigest := fileDigest(t, pluginPath("l0calo")), fileDigest(t, pluginPath("passthrough"))
	accepted := 0
	for id, r := range got {
		w := want[id]
		// Provenance: every stage that saw the event, with its plugin's
		// identity (the digest is the binary's sha256).
		steps := r.Steps()
		if len(steps) == 0 || steps[0].Plugin == nil || *steps[0].Plugin != (schemas.PluginID{Stage: "llt", Name: "l0calo", Version: steps[0].Plugin.Version, Digest: lltDigest}) {
			t.Fatalf("event %d: first step %+v, want llt's l0calo with sha256 %s", id, steps, lltDigest)
		}
		if steps[0].Decision != w.Decision || steps[0].Fired != w.Lines {
			t.Fatalf("event %d: llt step %+v, l0calo in process says %+v", id, steps[0], w)
		}
		if w.Decision == schemas.DecisionAccept {
			if len(steps) != 2 || steps[1].Plugin.Digest != hltDigest || steps[1].Plugin.Stage != "hlt" || steps[1].Decision != r.Decision || steps[1].Fired != r.Lines || steps[1].Lines != r.Lines {
				t.Fatalf("event %d: steps %+v, want llt's then hlt's (%+v)", id, steps, r)
			}
		} else if len(steps) != 1 {
			t.Fatalf("event %d: %d steps, want llt's only", id, len(steps))
		}
		switch {
		case w.Decision != schemas.DecisionAccept:
			if r.Decision != w.Decision || r.Stage != "llt" {
				t.Fatalf("event %d: %+v, l0calo in process says %v", id, r, w.Decision)
			}
		case id%2 == 0:
			accepted++
			if r.Decision != schemas.DecisionAccept || r.Stage != "hlt" || r.Lines != 1 {
				t.Fatalf("event %d: %+v, want accepted by hlt", id, r)
			}
		default:
			if r.Decision != schemas.DecisionReject || r.Stage != "hlt" {
				t.Fatalf("event %d: %+v, want rejected by hlt", id, r)
			}
		}
	}
	if accepted == 0 || len(got) != 3000 {
		t.Fatalf("%d events decided, %d accepted", len(got), accepted)
	}
	// State: what each stage decided, counted by the chain itself: llt's
	// decisions and lines are l0calo's, hlt saw llt's accepts.
	lltWant := StageState{StageInfo: StageInfo{Name: "llt", Plugin: pluginPath("l0calo"), Instances: 2, Digest: lltDigest}, Up: 2,
		Calls: uint64(len(batches)), Lines: make([]uint64, 4)}
	for _, w := range want {
		switch w.Decision {
		case schemas.DecisionAccept:
			lltWant.Accepted++
			for b := range schemas.FiredLines(w.Lines, nil) {
				lltWant.Lines[b]++
			}
		case schemas.DecisionReject:
			lltWant.Rejected++
		default:
			lltWant.Deferred++
		}
	}
	hltWant := StageState{StageInfo: StageInfo{Name: "hlt", Plugin: pluginPath("passthrough"), Instances: 1, Digest: hltDigest}, Up: 1,
		Calls: uint64(len(batches)), Accepted: uint64(accepted), Rejected: lltWant.Accepted - uint64(accepted), Lines: []uint64{uint64(accepted)}}
	if len(running) != 2 {
		t.Fatalf("state of %d stages", len(running))
	}
	for i, w := range []StageState{lltWant, hltWant} {
		g := running[i]
		g.Description = sdk.Description{}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("stage %d state\n got %+v\nwant %+v", i, g, w)
		}
	}
	if running[0].Seen() != 3000 || running[1].Seen() != lltWant.Accepted || running[0].Description.Name != "l0calo" {
		t.Fatalf("seen %d and %d, llt's plugin %q", running[0].Seen(), running[1].Seen(), running[0].Description.Name)
	}
	if after := c.State(); after[0].Up != 0 || after[1].Up != 0 || after[0].Accepted != lltWant.Accepted {
		t.Fatalf("state after Close: %+v", after)
	}
	// Metrics: every event left llt once; hlt saw only llt's accepts.
	llt := metricValue(t, reg, "sluice_trigger_events_total", "stage", "llt", "decision", "accept") +
		metricValue(t, reg, "sluice_trigger_events_total", "stage", "llt", "decision", "reject")
	if llt != 3000 {
		t.Fatalf("llt counted %v events", llt)
	}
	if n := metricValue(t, reg, "sluice_trigger_events_total", "stage", "hlt", "decision", "accept"); int(n) != accepted {
		t.Fatalf("hlt counted %v accepts, want %d", n, accepted)
	}
	if n := metricValue(t, reg, "sluice_trigger_instances_up", "stage", "llt"); n != 0 {
		t.Fatalf("%v llt instances up after Close", n)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(fams).Lint()
	if err != nil || len(problems) > 0 {
		t.Fatalf("promlint: %v %v", problems, err)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("errors logged:\n%s", logs)
	}
}

// TestHostPrescale keeps 1 in 4 of the passthrough's line "all" on the host:
// the 1st, 5th, 9th … accepted events.
func TestHostPrescale(t *testing.T) {
	mem := checkedMem(t)
	batches := synthetic(t, mem, 100, 103, 10, 16)
	c, err := NewChain(context.Background(), Config{Stages: []StageConfig{
		{Name: "hlt", Plugin: pluginPath("passthrough"), Prescales: map[string]uint32{"all": 4}},
	}, Options: Options{Allocator: mem}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := runChain(t, c, batches)
	n := 0
	for id := uint64(100); id < 203; id++ {
		r := got[id]
		keep := (id-100)%4 == 0
		if keep != (r.Decision == schemas.DecisionAccept) || (!keep && (r.Reason.Kind != schemas.ReasonPrescaled || r.Reason.Text != "prescaled")) {
			t.Fatalf("event %d: %+v, keep=%v", id, r, keep)
		}
		if keep {
			n++
		}
	}
	if n != 26 {
		t.Fatalf("%d of 103 kept, want 26", n)
	}
	if st := c.State()[0]; st.Accepted != 26 || st.Rejected != 77 || st.Prescaled != 77 || !reflect.DeepEqual(st.Lines, []uint64{26}) {
		t.Fatalf("state %+v: want 26 accepted, 77 rejected by the prescale", st)
	}
	// A prescale of a line the plugin does not have stops the chain.
	_, err = NewChain(context.Background(), Config{Stages: []StageConfig{
		{Name: "hlt", Plugin: pluginPath("passthrough"), Prescales: map[string]uint32{"muon": 4}},
	}})
	if err == nil || !strings.Contains(err.Error(), `"muon"`) {
		t.Fatalf("unknown prescaled line: %v", err)
	}
}

// TestDeferFraction defers a fixed quarter of the events by event id, the
// same events whatever the batching; the plugin never sees them.
func TestDeferFraction(t *testing.T) {
	mem := checkedMem(t)
	reg := prometheus.NewRegistry()
	c, err := NewChain(context.Background(), Config{Stages: []StageConfig{
		{Name: "hlt", Plugin: pluginPath("passthrough"), Deferral: Deferral{Fraction: 0.25}},
	}, Options: Options{Allocator: mem}, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a := runChain(t, c, synthetic(t, mem, 0, 4000, 400, 16))
	b := runChain(t, c, synthetic(t, mem, 0, 4000, 77, 16))
	deferred := 0
	for id, r := range a {
		if r.Decision != b[id].Decision {
			t.Fatalf("event %d: %v with batches of 400, %v with batches of 77", id, r.Decision, b[id].Decision)
		}
		if r.Decision == schemas.DecisionDefer {
			deferred++
			// The text kept in the store (shown by `sluice store ls` beside
			// the stage) spells the reason as the ledger names it.
			if r.Reason.Kind != schemas.ReasonFraction || r.Reason.Text != "fraction" || r.ReasonName() != "hlt/fraction" ||
				r.Stage+"/"+r.Reason.Text != r.ReasonName() {
				t.Fatalf("event %d deferred with reason %+v", id, r.Reason)
			}
		}
	}
	if deferred < 900 || deferred > 1100 {
		t.Fatalf("%d of 4000 deferred, want about 1000", deferred)
	}
	// The plugin answered only for the others.
	if n := metricValue(t, reg, "sluice_trigger_events_total", "stage", "hlt", "decision", "accept"); int(n) != 2*(4000-deferred) {
		t.Fatalf("%v accepts counted, want %d", n, 2*(4000-deferred))
	}
}

// TestSetDeferralFraction: the fraction moved while the chain runs (the
// node's fill planner) defers about the new share from the next batch on,
// and a larger fraction defers a superset of the events a smaller one did.
func TestSetDeferralFraction(t *testing.T) {
	mem := checkedMem(t)
	c, err := NewChain(context.Background(), Config{Stages: []StageConfig{
		{Name: "hlt", Plugin: pluginPath("passthrough"), Deferral: Deferral{Fraction: 0.25}},
	}, Options: Options{Allocator: mem}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if f, err := c.DeferralFraction("hlt"); err != nil || f != 0.25 {
		t.Fatalf("configured fraction read back as %v, %v", f, err)
	}
	deferredAt := func(f float64) map[uint64]bool {
		if err := c.SetDeferralFraction("hlt", f); err != nil {
			t.Fatal(err)
		}
		out := map[uint64]bool{}
		for id, r := range runChain(t, c, synthetic(t, mem, 0, 4000, 400, 16)) {
			if r.Decision == schemas.DecisionDefer {
				out[id] = true
			}
		}
		return out
	}
	low, high, none := deferredAt(0.1), deferredAt(0.6), deferredAt(0)
	if len(low) < 300 || len(low) > 500 || len(high) < 2200 || len(high) > 2600 || len(none) != 0 {
		t.Fatalf("deferred %d at 0.1, %d at 0.6, %d at 0 of 4000", len(low), len(high), len(none))
	}
	for id := range low {
		if !high[id] {
			t.Fatalf("event %d deferred at 0.1 but not at 0.6", id)
		}
	}
	if err := c.SetDeferralFraction("hlt", 7); err != nil {
		t.Fatal(err)
	}
	if f, _ := c.DeferralFraction("hlt"); f != 1 {
		t.Fatalf("fraction 7 clamped to %v, want 1", f)
	}
	if err := c.SetDeferralFraction("nope", 0.5); !errors.Is(err, ErrNoStage) {
		t.Fatalf("unknown stage: %v", err)
	}
}

// TestDeferBacklog: with one instance busy (hung until its deadline) and a
// batch waiting for it, a third batch is deferred whole.
func TestDeferBacklog(t *testing.T) {
	mem := checkedMem(t)
	batches := synthetic(t, mem, 0, 30, 10, 16)
	c, err := NewChain(context.Background(), Config{Stages: []StageConfig{{
		Name: "hlt", Plugin: pluginPath("hang"), Params: map[string]string{"event": "5", "once": t.TempDir() + "/hung"},
		Deadline: 2 * time.Second, Deferral: Deferral{Backlog: 5},
	}}, Options: Options{Allocator: mem}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := c.stages[0]
	results := make([][]schemas.Verdict, 2)
	done := make(chan int, 2)
	for i := range 2 {
		go func() {
			res, err := decideRec(context.Background(), c, batches[i])
			if err != nil {
				t.Error(err)
			}
			results[i] = res
			done <- i
		}()
		if i == 0 {
			waitFor(t, func() bool { return len(s.free) == 0 }) // batch 0 holds the instance
		}
	}
	waitFor(t, func() bool { return s.waiting.Load() == 10 }) // batch 1 waits
	res, err := decideRec(context.Background(), c, batches[2])
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Decision != schemas.DecisionDefer || r.Reason.Kind != schemas.ReasonBacklog || !strings.HasPrefix(r.Reason.Text, r.Reason.Kind.String()+": ") || r.Reason.Text != "backlog: above 5 events" {
			t.Fatalf("batch 2 row %d: %+v", i, r)
		}
	}
	<-done
	<-done
	// Batch 0 hung once, was resent to a restarted instance and accepted.
	for b := range 2 {
		for i, r := range results[b] {
			if r.Decision != schemas.DecisionAccept {
				t.Fatalf("batch %d row %d: %+v", b, i, r)
			}
		}
	}
}

// waitFor polls cond until it holds (the test's own timeout bounds it).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for !cond() {
		time.Sleep(2 * time.Millisecond)
	}
}

// Every labelled series of a stage exists at 0 from the start: a
// dashboard shows 0 restarts, not "no data", before the first one.
func TestChainMetricsStartAtZero(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c, err := NewChain(context.Background(), Config{
		Stages:     []StageConfig{{Name: "hlt", Plugin: pluginPath("passthrough")}},
		Options:    Options{Allocator: checkedMem(t)},
		Registerer: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, lp := range m.GetLabel() {
				if lp.GetName() != "stage" && lp.GetName() != "plugin" {
					key += "/" + lp.GetValue()
				}
			}
			seen[key] = true
		}
	}
	for _, want := range []string{
		"sluice_trigger_restarts_total/crash", "sluice_trigger_restarts_total/deadline",
		"sluice_trigger_call_failures_total/error", "sluice_trigger_batches_total/trigger_error",
		"sluice_trigger_events_total/defer", "sluice_trigger_line_events_total/all",
		"sluice_trigger_prescaled_events_total/all", "sluice_trigger_transport_batches_total/inline",
	} {
		if !seen[want] {
			t.Errorf("no series %s before the first batch (have %v)", want, seen)
		}
	}
}

// fileDigest is the sha256 (hex) of the file at path.
func fileDigest(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// TestHostPrescaleInBatchOrder: batches numbered with WithBatchOrder get
// the counter prescale in their order however they are decided: batch 1
// decided first waits, and the 1st, 5th, 9th … events of batch 0 then 1
// are kept, as when decided one after the other.
func TestHostPrescaleInBatchOrder(t *testing.T) {
	mem := checkedMem(t)
	batches := synthetic(t, mem, 100, 20, 10, 16) // events 100-109, 110-119
	c, err := NewChain(context.Background(), Config{Stages: []StageConfig{
		{Name: "hlt", Plugin: pluginPath("passthrough"), Prescales: map[string]uint32{"all": 4}},
	}, Options: Options{Allocator: mem}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		res []schemas.Verdict
		err error
	}
	second := make(chan result, 1)
	go func() {
		res, err := decideRec(WithBatchOrder(ctx, 1), c, batches[1])
		second <- result{res, err}
	}()
	// Batch 1 is decided by the plugin, then waits for batch 0's turn.
	waitCalls := time.Now().Add(20 * time.Second)
	for c.State()[0].Calls < 1 && time.Now().Before(waitCalls) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	if len(second) != 0 {
		t.Fatal("batch 1 finished before batch 0 was decided: its prescale did not wait for its turn")
	}
	first, err := decideRec(WithBatchOrder(ctx, 0), c, batches[0])
	if err != nil {
		t.Fatal(err)
	}
	r := <-second
	if r.err != nil {
		t.Fatal(r.err)
	}
	got := map[uint64]schemas.Verdict{}
	collect(t, got, batches[0], first)
	collect(t, got, batches[1], r.res)
	for id := uint64(100); id < 120; id++ {
		if keep := (id-100)%4 == 0; keep != (got[id].Decision == schemas.DecisionAccept) {
			t.Errorf("event %d: %v, want kept %v (the 1st, 5th, 9th … in batch order)", id, got[id].Decision, keep)
		}
	}
}
