package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node"
	"github.com/sluice-daq/sluice/node/fill"
)

// fillSample is one /status read during TestFillAwareDeferral.
type fillSample struct {
	at       time.Time
	plan     fill.Plan
	seen     uint64 // events hlt1 saw
	deferred uint64 // events hlt1 deferred by its (planned) fraction
	backlog  uint64
	writable bool
	active   bool
}

type fullStatus struct {
	Ledger node.Ledger       `json:"ledger"`
	Store  node.StoreStatus  `json:"store"`
	Replay node.ReplayStatus `json:"replay"`
	Fill   *node.FillStatus  `json:"fill"`
}

func readFullStatus(t *testing.T, addr string) fullStatus {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s fullStatus
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// fillBudget is the test's fill.max_backlog_bytes: the events are 4
// fragments of 256 bytes, about 1.1 kB stored; the plan aims at
// store_share (0.8) of it, about 330 events.
const fillBudget = 400 << 10

// TestFillAwareDeferral drives fill-aware deferral with a compressed
// schedule: fill 9001 (1.5 s) before a long inter-fill (3 s), fill 9002
// (1.5 s) before a short one (1 s), fill 9003 (3 s) before none known (the
// expected 10 s). The node sees 200 events/s throughout (the beam-off
// data stand in for cosmics: replay runs with the inputs busy) and replays
// at most 400/s. It must defer more in 9001, whose inter-fill can absorb
// it, than in 9002; replay every backlog before the next fill begins; keep
// the backlog under max_backlog_bytes in 9003, where only that bounds it;
// and decide every deferred event exactly once.
func TestFillAwareDeferral(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	sched := filepath.Join(dir, "schedule.yaml")
	writeSchedule := func(doc string) {
		t.Helper()
		if err := os.WriteFile(sched+".new", []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(sched+".new", sched); err != nil {
			t.Fatal(err)
		}
	}
	writeSchedule("format: 1\nfills: []\n")
	file := writeConfig(t, `
run: 61
inputs:
  - uri: shm://{{RING}}
    emulator: {events: 1000000, rate: 200, fragment_size: {mean: 256}}
sources:
  - {name: ecal, sources: "0-3"}
builder: {batch_events: 4, timeout: 2s}
trigger:
  stages:
    - {name: hlt1, plugin: {{BIN}}/plugins/passthrough}
    - {name: hlt2, plugin: {{BIN}}/plugins/passthrough, params: {prescale: "2"}, when: replay}
store: {path: {{STORE}}, min_free_bytes: 256MiB}
replay: {rate: 400, batch_events: 16}
fill:
  schedule: {{SCHED}}
  poll: 100ms
  safety: 0.3
  max_fraction: 0.9
  max_backlog_bytes: {{BUDGET}}
  expected_fill: 3s
  expected_inter_fill: 10s
http: {address: "127.0.0.1:0"}
log: {format: json}
`, map[string]string{"RING": shmName(t), "BIN": bin, "STORE": store, "SCHED": sched, "BUDGET": fmt.Sprint(fillBudget)})
	summary := filepath.Join(dir, "run.json")
	p := start(t, "run", "--config", file, "--summary-json", summary)
	addr := p.httpAddr(t)
	waitFor(t, "the first fill plan", 60*time.Second, func() bool {
		s := readFullStatus(t, addr)
		return s.Fill != nil && s.Fill.Plans > 0 && s.Ledger.EventsBuilt > 0
	})
	if s := readFullStatus(t, addr); s.Fill.Plan.Beam || s.Fill.Plan.Reason != fill.ReasonBeamOff || s.Fill.Stage != "hlt1" || !strings.HasPrefix(s.Fill.Source, "schedule ") {
		t.Fatalf("before any fill: %+v", s.Fill)
	}
	var samples []fillSample
	sample := func(s fullStatus) {
		var seen uint64
		for _, st := range s.Ledger.Stages {
			if st.Name == "hlt1" {
				seen = st.Seen
			}
		}
		samples = append(samples, fillSample{at: time.Now(), plan: s.Fill.Plan, seen: seen, deferred: s.Ledger.DeferredBy["hlt1/fraction"],
			backlog: s.Store.DeferredBacklog, writable: s.Store.Writable, active: s.Replay.Active})
	}
	// A sample before the first fill, however late the loop below starts.
	sample(readFullStatus(t, addr))
	// The schedule, from a second from now (the node reads the file again
	// when it changes).
	t0 := time.Now().Add(time.Second).UTC()
	stamp := func(d float64) string {
		return t0.Add(time.Duration(d * float64(time.Second))).Format(time.RFC3339Nano)
	}
	writeSchedule(fmt.Sprintf(`format: 1
fills:
  - {fill: 9001, start: %s, end: %s}
  - {fill: 9002, start: %s, end: %s}
  - {fill: 9003, start: %s, end: %s}
`, stamp(0), stamp(1.5), stamp(4.5), stamp(6), stamp(7), stamp(10)))
	lastEnd := t0.Add(10 * time.Second)

	var last fullStatus
	deadline := lastEnd.Add(60 * time.Second)
	for {
		s := readFullStatus(t, addr)
		sample(s)
		last = s
		// Done once the last fill ended and its backlog was replayed.
		if time.Now().After(lastEnd) && !s.Fill.Plan.Beam && s.Fill.Plan.Fill == 9003 && s.Store.DeferredBacklog == 0 && !s.Replay.Active {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the last fill's backlog was not replayed within a minute: %+v %+v\n%s", s.Fill, s.Replay, p.log())
		}
		select {
		case <-p.done:
			t.Fatalf("the node ended:\n%s", p.log())
		case <-time.After(20 * time.Millisecond):
		}
	}
	metrics := scrape(t, addr)
	if code, body := post(t, "http://"+addr+"/run/stop", nil); code != http.StatusAccepted {
		t.Fatalf("POST /run/stop: %d %q", code, body)
	}
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.log())
	}

	// What each fill deferred: from the last sample before it to the
	// first after it (between fills the fraction is min_fraction, 0).
	share := func(fillNo uint32) (deferred, seen uint64) {
		first, lastIn := -1, -1
		for i, s := range samples {
			if s.plan.Beam && s.plan.Fill == fillNo {
				if first < 0 {
					first = i
				}
				lastIn = i
			}
		}
		if first < 1 || lastIn+1 >= len(samples) {
			t.Fatalf("fill %d not seen whole by the samples (%d..%d of %d)", fillNo, first, lastIn, len(samples))
		}
		b, a := samples[first-1], samples[lastIn+1]
		return a.deferred - b.deferred, a.seen - b.seen
	}
	d1, s1 := share(9001)
	d2, s2 := share(9002)
	d3, s3 := share(9003)
	f1, f2 := float64(d1)/float64(max(s1, 1)), float64(d2)/float64(max(s2, 1))
	t.Logf("fill 9001: %d of %d deferred (%.2f); 9002: %d of %d (%.2f); 9003: %d of %d", d1, s1, f1, d2, s2, f2, d3, s3)
	if s1 < 100 || s2 < 100 {
		t.Fatalf("the fills saw %d and %d events, want about 300 each", s1, s2)
	}
	// A long inter-fill ahead (400/s × 3 s × 0.3 = 360 events for 300)
	// lets the planner defer up to max_fraction; a short one (120 events)
	// about 0.4. A planner that never defers fails here.
	if d1 == 0 || f1 < 0.5 || f1 < f2+0.15 {
		t.Fatalf("fill 9001 (long inter-fill ahead) deferred %.2f, fill 9002 (short one) %.2f: want more before the long one, and at least half", f1, f2)
	}
	// Each backlog was replayed before the next fill began.
	starts := map[uint32]node.FillStart{}
	for _, fs := range last.Fill.FillStarts {
		starts[fs.Fill] = fs
	}
	for _, f := range []uint32{9001, 9002, 9003} {
		fs, ok := starts[f]
		if !ok {
			t.Fatalf("fill %d's start not recorded: %+v", f, last.Fill.FillStarts)
		}
		if fs.BacklogEvents != 0 {
			t.Errorf("fill %d began with %d deferred events not replayed", f, fs.BacklogEvents)
		}
	}
	// The backlog budget bounded fill 9003 (nothing else did: its
	// inter-fill is the expected 10 s) and was never exceeded; the store
	// never refused a write.
	budgetBound := false
	for _, s := range samples {
		if s.plan.Fill == 9003 && s.plan.Beam && s.plan.Reason == fill.ReasonBacklogBudget {
			budgetBound = true
		}
		if s.plan.BacklogBytes > fillBudget {
			t.Errorf("backlog %d bytes (%d events) over max_backlog_bytes %d at %s", s.plan.BacklogBytes, s.backlog, fillBudget, s.at.Format(time.StampMilli))
		}
		if !s.writable {
			t.Errorf("the store refused writes at %s", s.at.Format(time.StampMilli))
		}
	}
	if !budgetBound || last.Fill.BacklogPeakBytes > fillBudget || last.Fill.BacklogPeakBytes < fillBudget/2 {
		t.Fatalf("fill 9003: budget bound %v, backlog peak %d bytes, want the budget %d to bind, used over half and never exceeded", budgetBound, last.Fill.BacklogPeakBytes, fillBudget)
	}
	for _, m := range []string{"sluice_store_refused_writes_total 0", "sluice_fill_beam 0", `sluice_fill_plan_reason{reason="beam-off"} 1`,
		"sluice_fill_backlog_at_fill_start_events 0", fmt.Sprint("sluice_fill_max_backlog_bytes ", fillBudget)} {
		if !strings.Contains(metrics, m+"\n") {
			t.Errorf("metrics lack %q", m)
		}
	}
	// The dashboard's fill panels (and every other) plot what this node
	// serves.
	dash, err := os.ReadFile(filepath.Join(repo, "configs/grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range dashboardMetrics(dash) {
		if !served(metrics, m) {
			t.Errorf("the dashboard plots %s, which /metrics does not serve", m)
		}
	}
	// Exactly once: every deferred event replay decided left the deferred
	// stream (accepted ones to the accepted stream); none is left.
	l := readLedger(t, summary)
	st := storeStat(t, store)
	r := last.Replay
	if !l.Balanced || st["deferred"] != 0 || r.Events != l.EventsStoredDeferred || r.Kept != 0 ||
		st["accepted"] != l.EventsStoredAccepted+r.Accepted || r.Accepted == 0 || r.Accepted == r.Events {
		t.Fatalf("store %v, replay %+v, ledger stored %d accepted + %d deferred (balanced %v)", st, r, l.EventsStoredAccepted, l.EventsStoredDeferred, l.Balanced)
	}
}

// scrape is GET /metrics.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
