package plugins

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/plugins/internal/synthbatch"
	"github.com/sluice-daq/sluice/schemas"
)

// waitShadow polls until the shadow of stage 0 has compared or skipped
// want events (generous limit: a loaded machine starts plugins slowly).
func waitShadow(t *testing.T, c *Chain, want uint64) *ShadowState {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		sh := c.State()[0].Shadow
		if sh.Compared+sh.SkippedEvents() >= want {
			return sh
		}
		if time.Now().After(deadline) {
			t.Fatalf("shadow compared %d and skipped %d events, want %d in all", sh.Compared, sh.SkippedEvents(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// atNodePriority has the shadow run at the node's CPU priority: the tests
// count what it compares, and a shadow at the lowest priority would make
// slow progress on a loaded machine.
func atNodePriority(sh *ShadowConfig) *ShadowConfig {
	nice, idle := 0, false
	sh.Nice, sh.Idle = &nice, &idle
	return sh
}

func shadowChain(t *testing.T, reg prometheus.Registerer, sh *ShadowConfig) *Chain {
	t.Helper()
	if sh != nil {
		atNodePriority(sh)
	}
	log, _ := testLogger()
	c, err := NewChain(context.Background(), Config{Stages: []StageConfig{{
		Name: "hlt1", Plugin: pluginPath("passthrough"), RestartBackoff: 10 * time.Millisecond, Shadow: sh,
	}}, Options: Options{Logger: log}, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestShadowDiffCounts: a shadow that accepts only every third event id
// (passthrough prescale=3) beside a production passthrough that accepts
// all: the diff counters are exactly the events the two decide apart, the
// production decisions are untouched, and every id in the sample differs.
func TestShadowDiffCounts(t *testing.T) {
	const events, perBatch = 600, 50
	batches := synthetic(t, checkedMem(t), 1, events, perBatch, 16)
	reg := prometheus.NewRegistry()
	c := shadowChain(t, reg, &ShadowConfig{Plugin: pluginPath("passthrough"), Params: map[string]string{"prescale": "3"}, Queue: 64})
	got := runChain(t, c, batches)
	for id, v := range got {
		if v.Decision != schemas.DecisionAccept || v.Lines != 1 {
			t.Fatalf("event %d: production decided %v lines %b with a shadow; want accept on line all", id, v.Decision, v.Lines)
		}
	}
	sh := waitShadow(t, c, events)
	const agree = events / 3 // ids 3, 6, … 600
	const differ = events - agree
	if sh.Compared != events || sh.Agreeing != agree || sh.Differ() != differ || sh.SkippedEvents() != 0 {
		t.Fatalf("shadow: compared %d agreeing %d differing %d skipped %d; want %d, %d, %d, 0", sh.Compared, sh.Agreeing, sh.Differ(), sh.SkippedEvents(), events, agree, differ)
	}
	wantPairs := []DecisionPair{{Production: schemas.DecisionAccept, Shadow: schemas.DecisionReject, Events: differ}}
	if !slices.Equal(sh.Differing, wantPairs) {
		t.Fatalf("differing pairs %+v, want %+v", sh.Differing, wantPairs)
	}
	if want := []LineDiff{{Line: "all", OnlyProduction: differ}}; !slices.Equal(sh.Lines, want) {
		t.Fatalf("line diffs %+v, want %+v", sh.Lines, want)
	}
	if len(sh.Sample) != ShadowSample {
		t.Fatalf("sample of %d ids, want %d", len(sh.Sample), ShadowSample)
	}
	for _, id := range sh.Sample {
		if id%3 == 0 || id < 1 || id > events {
			t.Fatalf("sample id %d: not an event the two decide apart", id)
		}
	}
	// The metrics follow the comparison's counters (added after each
	// batch's comparison): wait for the last batch's.
	for deadline := time.Now().Add(30 * time.Second); metricValue(t, reg, "sluice_trigger_shadow_compared_events_total", "stage", "hlt1") != events && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	for name, want := range map[string]float64{
		"sluice_trigger_shadow_compared_events_total":  events,
		"sluice_trigger_shadow_agreeing_events_total":  agree,
		"sluice_trigger_shadow_differing_events_total": differ,
		"sluice_trigger_shadow_skipped_events_total":   0,
	} {
		if got := metricValue(t, reg, name, "stage", "hlt1"); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := metricValue(t, reg, "sluice_trigger_shadow_differing_events_total", "stage", "hlt1", "production", "accept", "shadow", "reject"); got != differ {
		t.Errorf("differing accept->reject = %v, want %d", got, differ)
	}
	if got := metricValue(t, reg, "sluice_trigger_shadow_line_differing_events_total", "stage", "hlt1", "line", "all", "fired_by", "production"); got != differ {
		t.Errorf("line all fired by production only = %v, want %d", got, differ)
	}
	// The shadow's own processes report as a stage of their own.
	if got := metricValue(t, reg, "sluice_trigger_events_total", "stage", "hlt1/shadow", "decision", "reject"); got != differ {
		t.Errorf("shadow stage rejected %v events, want %d", got, differ)
	}
	if got := metricValue(t, reg, "sluice_trigger_events_total", "stage", "hlt1", "decision", "reject"); got != 0 {
		t.Errorf("production stage rejected %v events with a shadow, want 0", got)
	}
}

// TestShadowKilled SIGKILLs the shadow process between batches: production
// decides exactly as without a shadow, the batch the dead process was
// given is skipped (failed), and the shadow is restarted and compares the
// rest.
func TestShadowKilled(t *testing.T) {
	const events, perBatch = 1000, 50
	batches := synthetic(t, checkedMem(t), 1, events, perBatch, 16)
	want := runChain(t, shadowChain(t, nil, nil), batches)

	c := shadowChain(t, prometheus.NewRegistry(), &ShadowConfig{Plugin: pluginPath("passthrough"), Queue: 64})
	half := len(batches) / 2
	got := runChain(t, c, batches[:half])
	waitShadow(t, c, uint64(half*perBatch))
	sl := c.stages[0].shadow.st.slots[0]
	pid := int(sl.pid.Load())
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Wait until the process is gone (go-plugin reaps it), so that the next
	// batch meets a dead process.
	for deadline := time.Now().Add(30 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("shadow process %d still there after SIGKILL", pid)
		}
	}
	maps.Copy(got, runChain(t, c, batches[half:]))
	if !maps.EqualFunc(got, want, sameVerdict) {
		t.Fatalf("production decisions with a killed shadow differ from those without a shadow")
	}
	sh := waitShadow(t, c, events)
	if sh.Compared != events-perBatch || sh.Agreeing != sh.Compared {
		t.Fatalf("shadow compared %d (agreeing %d), want %d, all agreeing", sh.Compared, sh.Agreeing, events-perBatch)
	}
	if want := []ShadowSkip{{Reason: skipFailed, Batches: 1, Events: perBatch}}; !slices.Equal(sh.Skipped, want) {
		t.Fatalf("skipped %+v, want %+v", sh.Skipped, want)
	}
	if sh.Stage.Restarts != 1 || sh.Stage.Up != 1 {
		t.Fatalf("shadow restarts %d, up %d; want 1, 1", sh.Stage.Restarts, sh.Stage.Up)
	}
}

// TestShadowBehind: a shadow that hangs on its first batch never holds
// production up: every batch is decided by production as without a
// shadow, the batches that arrive while its queue is full are skipped
// (queue_full), and the hung one is abandoned at the shadow's deadline.
// Every event is accounted for once the chain is closed.
func TestShadowBehind(t *testing.T) {
	const events, perBatch = 400, 20
	batches := synthetic(t, checkedMem(t), 1, events, perBatch, 16)
	want := runChain(t, shadowChain(t, nil, nil), batches)
	log, _ := testLogger()
	c, err := NewChain(context.Background(), Config{Stages: []StageConfig{{
		Name: "hlt1", Plugin: pluginPath("passthrough"),
		Shadow: atNodePriority(&ShadowConfig{Plugin: pluginPath("hang"), Params: map[string]string{"event": "1"}, Queue: 1, Deadline: time.Hour}),
	}}, Options: Options{Logger: log}})
	if err != nil {
		t.Fatal(err)
	}
	got := runChain(t, c, batches)
	if !maps.EqualFunc(got, want, sameVerdict) {
		t.Fatal("production decisions with a hung shadow differ from those without a shadow")
	}
	c.Close()
	sh := c.State()[0].Shadow
	if sh.Compared != 0 || sh.SkippedEvents() != events {
		t.Fatalf("hung shadow: compared %d, skipped %d (%+v); want 0 and %d", sh.Compared, sh.SkippedEvents(), sh.Skipped, events)
	}
	byReason := map[string]uint64{}
	for _, k := range sh.Skipped {
		byReason[k.Reason] = k.Events
	}
	// The first batch hangs in the shadow until Close; at most the queue's
	// one batch waits behind it; the rest were skipped as they came.
	if byReason[skipQueueFull] < events-2*perBatch || byReason[skipStopped] > 2*perBatch {
		t.Fatalf("skipped by reason %v; want >= %d queue_full and <= %d stopped", byReason, events-2*perBatch, 2*perBatch)
	}
}

// TestShadowValidate: a shadow's problems name their path.
func TestShadowValidate(t *testing.T) {
	bad := -1
	tr := Trigger{Stages: []StageConfig{{Name: "hlt1", Plugin: pluginPath("passthrough"),
		Shadow: &ShadowConfig{Plugin: "", Queue: 2000, Nice: &bad}}}}
	tr.SetDefaults()
	got := map[string]bool{}
	for _, p := range tr.Validate() {
		got[p.Path] = true
	}
	for _, p := range []string{"stages[0].shadow.plugin", "stages[0].shadow.queue", "stages[0].shadow.nice"} {
		if !got[p] {
			t.Errorf("no problem at %s (got %v)", p, got)
		}
	}
	tr.Stages[0].Shadow = &ShadowConfig{Plugin: "/nonexistent/shadow-plugin"}
	ps := tr.Preflight()
	if len(ps) != 1 || ps[0].Path != "stages[0].shadow.plugin" {
		t.Fatalf("preflight %v, want one problem at stages[0].shadow.plugin", ps)
	}
}

// sameVerdict: verdicts equal in every field (their plugin identities by
// value: two chains' stages point to identities of their own).
func sameVerdict(a, b schemas.Verdict) bool { return reflect.DeepEqual(a, b) }

// TestShadowNeverWaits: production never waits for a slow shadow, and the
// shadow holds none of production's memory once production releases a
// batch. The shadow (hang, once=FILE) hangs on the first batch; that batch
// is released (as the node's store does once it has written it) while the
// shadow is inside its call, and every later batch is released right after
// production decided it. Production decides every batch as without a
// shadow, every byte of every batch is back with its allocator while the
// shadow still hangs, and the counts are exact: the first batch skipped
// (released), the rest queue_full (the queue of 1 is the hung batch).
// A release that waited for the shadow would never return.
func TestShadowNeverWaits(t *testing.T) {
	const events, perBatch = 400, 20
	want := runChain(t, shadowChain(t, nil, nil), synthetic(t, checkedMem(t), 1, events, perBatch, 16))

	hung := filepath.Join(t.TempDir(), "hung")
	log, _ := testLogger()
	c, err := NewChain(context.Background(), Config{Stages: []StageConfig{{
		Name: "hlt1", Plugin: pluginPath("passthrough"),
		Shadow: atNodePriority(&ShadowConfig{Plugin: pluginPath("hang"), Params: map[string]string{"event": "1", "once": hung},
			Queue: 1, Deadline: time.Hour}),
	}}, Options: Options{Logger: log}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mem := checkedMem(t)
	decide := func(k int) (*schemas.EventBatch, []schemas.Verdict) {
		rec, err := synthbatch.Synthetic(mem, synthbatch.Spec{FirstEventID: uint64(1 + k*perBatch), Events: perBatch, FragmentSize: 16, Seed: 11})
		if err != nil {
			t.Error(err)
			return nil, nil
		}
		ev, err := schemas.NewEventBatch(rec)
		if err != nil {
			t.Error(err)
			rec.Release()
			return nil, nil
		}
		res, err := c.Decide(context.Background(), ev)
		if err != nil {
			t.Error(err)
		}
		return ev, res
	}
	got := map[uint64]schemas.Verdict{}
	first, res := decide(0)
	if first == nil {
		t.FailNow()
	}
	collect(t, got, first.Rec, res)
	// The shadow process is inside its call on the first batch once the
	// hang plugin made its file.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(hung); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the shadow never got the first batch")
		}
	}
	done := make(chan map[uint64]schemas.Verdict, 1)
	go func() {
		out := map[uint64]schemas.Verdict{}
		first.Release()
		for k := 1; k < events/perBatch; k++ {
			ev, res := decide(k)
			if ev == nil {
				break
			}
			collect(t, out, ev.Rec, res)
			ev.Release()
		}
		done <- out
	}()
	select {
	case rest := <-done:
		maps.Copy(got, rest)
	case <-time.After(60 * time.Second):
		t.Fatal("production did not decide and release 19 batches in 60 s beside a hung shadow: it waits for the shadow")
	}
	if !maps.EqualFunc(got, want, sameVerdict) {
		t.Fatal("production decisions beside a hung shadow differ from those without a shadow")
	}
	if n := mem.CurrentAlloc(); n != 0 {
		t.Fatalf("%d bytes of released batches still held while the shadow hangs; want 0", n)
	}
	c.Close()
	sh := c.State()[0].Shadow
	wantSkips := []ShadowSkip{{Reason: skipQueueFull, Batches: events/perBatch - 1, Events: events - perBatch},
		{Reason: skipReleased, Batches: 1, Events: perBatch}}
	if sh.Compared != 0 || !slices.Equal(sh.Skipped, wantSkips) {
		t.Fatalf("hung shadow: compared %d, skipped %+v; want 0 and %+v", sh.Compared, sh.Skipped, wantSkips)
	}
}

// TestLease: the states of a shadow's hold on a batch. A revoke frees the
// batch at once unless it is being placed (then when the placing ends), a
// revoked lease cannot be acquired, and only a revoke before end voids the
// shadow's result.
func TestLease(t *testing.T) {
	mem := checkedMem(t)
	newRec := func() arrow.RecordBatch {
		rec, err := synthbatch.Synthetic(mem, synthbatch.Spec{FirstEventID: 1, Events: 4, FragmentSize: 16, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	owned := func(rec arrow.RecordBatch) int64 { rec.Release(); return int64(mem.CurrentAlloc()) }

	// Revoked while queued: freed at once, never acquired, result void.
	l := newLease(newRec())
	if l.rows != 4 {
		t.Fatalf("lease of %d rows, want 4", l.rows)
	}
	rec, _ := l.acquire()
	l.placed()
	if owned(rec) == 0 {
		t.Fatal("the lease holds no reference before the revoke")
	}
	l.revoke()
	if n := mem.CurrentAlloc(); n != 0 {
		t.Fatalf("%d bytes held after a revoke", n)
	}
	if _, ok := l.acquire(); ok {
		t.Fatal("a revoked lease was acquired")
	}
	if !l.end() {
		t.Fatal("end after a revoke: result not void")
	}

	// Revoked while placing: freed when the placing ends.
	l = newLease(newRec())
	rec, ok := l.acquire()
	if !ok {
		t.Fatal("a fresh lease could not be acquired")
	}
	if owned(rec) == 0 {
		t.Fatal("the lease holds no reference")
	}
	l.revoke()
	if mem.CurrentAlloc() == 0 {
		t.Fatal("a revoke freed the batch while it was being placed")
	}
	l.placed()
	if n := mem.CurrentAlloc(); n != 0 {
		t.Fatalf("%d bytes held after the placing ended on a revoked lease", n)
	}
	if !l.end() {
		t.Fatal("end after a revoke during the placing: result not void")
	}

	// Ended first: freed at end, a later revoke changes nothing.
	l = newLease(newRec())
	rec, _ = l.acquire()
	l.placed()
	owned(rec)
	if l.end() {
		t.Fatal("end before any revoke: result void")
	}
	if n := mem.CurrentAlloc(); n != 0 {
		t.Fatalf("%d bytes held after end", n)
	}
	l.revoke()
	if l.wasRevoked() {
		t.Fatal("a revoke after end marked the lease")
	}
}

// TestShadowStore: the events the shadow decides otherwise are handed to
// the store's shadow stream (a copy, with the shadow's verdict and
// production's decision in the reason) up to store_bytes of payload; the
// rest are counted unstored (budget_full). The shadow (passthrough
// prescale=3) rejects 2 of 3 events production accepts; the budget holds
// exactly the payloads of the first 100 of those.
func TestShadowStore(t *testing.T) {
	const events, perBatch, fit = 600, 50, 100
	mem := checkedMem(t)
	batches := synthetic(t, mem, 1, events, perBatch, 16)
	payload := map[uint64]int64{} // differing event id -> payload bytes
	var budget int64
	for _, rec := range batches {
		ev, err := schemas.NewEventBatch(rec)
		if err != nil {
			t.Fatal(err)
		}
		for i := range ev.Len() {
			if id := ev.EventID(i); id%3 != 0 {
				for g := range ev.Groups {
					payload[id] += int64(len(ev.GroupPayload(g, i)))
				}
				if len(payload) <= fit {
					budget += payload[id]
				}
			}
		}
	}
	var mu sync.Mutex
	stored := map[uint64]schemas.Verdict{}
	var storedBytes int64
	store := func(ev *schemas.EventBatch, v []schemas.Verdict) (int64, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(v) != ev.Len() {
			t.Errorf("%d verdicts for %d events", len(v), ev.Len())
		}
		for i := range ev.Len() {
			id := ev.EventID(i)
			var n int64
			for g := range ev.Groups {
				n += int64(len(ev.GroupPayload(g, i)))
			}
			if n != payload[id] {
				t.Errorf("event %d: %d payload bytes handed to the store, %d in the batch", id, n, payload[id])
			}
			stored[id] = v[i]
			storedBytes += n
		}
		return 0, nil
	}
	reg := prometheus.NewRegistry()
	log, _ := testLogger()
	c, err := NewChain(context.Background(), Config{Stages: []StageConfig{{
		Name: "hlt1", Plugin: pluginPath("passthrough"),
		Shadow: atNodePriority(&ShadowConfig{Plugin: pluginPath("passthrough"), Params: map[string]string{"prescale": "3"},
			Queue: 64, StoreBytes: conf.ByteSize(budget)}),
	}}, Options: Options{Logger: log, ShadowStore: store}, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	runChain(t, c, batches)
	sh := waitShadow(t, c, events)
	const differ = events - events/3
	if sh.Compared != events || sh.Differ() != differ || sh.Stored != fit || sh.StoredBytes != uint64(budget) {
		t.Fatalf("compared %d differing %d stored %d (%d bytes); want %d, %d, %d (%d bytes)", sh.Compared, sh.Differ(), sh.Stored, sh.StoredBytes, events, differ, fit, budget)
	}
	if want := []ShadowUnstored{{Reason: unstoredBudget, Events: differ - fit}}; !slices.Equal(sh.Unstored, want) {
		t.Fatalf("unstored %+v, want %+v", sh.Unstored, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(stored) != fit || storedBytes != budget {
		t.Fatalf("%d events (%d bytes) handed to the store, want %d (%d bytes)", len(stored), storedBytes, fit, budget)
	}
	for id, v := range stored {
		if id%3 == 0 || id > 150 {
			t.Errorf("event %d stored: not among the first %d differing events", id, fit)
		}
		if v.Decision != schemas.DecisionReject || v.Stage != "hlt1/shadow" || v.Reason.Text != "production: accept (all)" {
			t.Errorf("event %d stored with decision %v stage %q reason %q; want reject, hlt1/shadow, \"production: accept (all)\"", id, v.Decision, v.Stage, v.Reason.Text)
		}
	}
	if got := metricValue(t, reg, "sluice_trigger_shadow_stored_events_total", "stage", "hlt1"); got != fit {
		t.Errorf("stored metric %v, want %d", got, fit)
	}
	if got := metricValue(t, reg, "sluice_trigger_shadow_unstored_events_total", "stage", "hlt1", "reason", unstoredBudget); got != differ-fit {
		t.Errorf("unstored budget_full metric %v, want %d", got, differ-fit)
	}
}
