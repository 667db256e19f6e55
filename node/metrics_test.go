package node

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-daq/sluice/node/transport"
)

// gathered sums each metric family's series of a node's registry by name.
func gathered(t *testing.T, n *Node) map[string]float64 {
	t.Helper()
	fams, err := n.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				out[f.GetName()] += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[f.GetName()] += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[f.GetName()] += float64(m.GetHistogram().GetSampleCount())
			default:
				out[f.GetName()] += 0
			}
		}
	}
	return out
}

// The events and bytes the store wrote are counted once, from its
// acknowledgements as the ledger counts them, and still served after the
// store closed.
func TestStoredEventsCountedOnce(t *testing.T) {
	cfg := testConfig(t, 1)
	in := &fakeInput{sources: []uint32{0, 1, 2, 3, 10, 11}, events: 200, packing: 6, size: 100}
	l, n, err := runNode(t, cfg, &Parts{Inputs: []transport.Input{in}, Finite: []bool{true}, Chain: &fakeChain{}}, nil)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, l.String())
	}
	got := gathered(t, n)
	for _, dup := range []string{"sluice_store_events_total", "sluice_store_bytes_total"} {
		if _, ok := got[dup]; ok {
			t.Errorf("%s is served beside the node's own count", dup)
		}
	}
	if v := got["sluice_events_stored_total"]; v != float64(l.EventsStored) || l.EventsStored != 80 {
		t.Errorf("sluice_events_stored_total %v, ledger stored %d (want 80)", v, l.EventsStored)
	}
	if v := got["sluice_stored_bytes_total"]; v == 0 || v != float64(l.BytesStored) {
		t.Errorf("sluice_stored_bytes_total %v, ledger %d bytes stored", v, l.BytesStored)
	}
}

// Every panel of the shipped dashboard plots metrics the node serves, and a
// panel plotting a latency says whose in its title.
func TestDashboardPanels(t *testing.T) {
	data, err := os.ReadFile("../configs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	// The word a title needs for each latency it plots.
	owner := map[string]string{
		"sluice_store_write_latency_seconds":   "store",
		"sluice_trigger_call_duration_seconds": "trigger",
		"sluice_event_build_seconds":           "building",
		"sluice_batch_queue_wait_seconds":      "queue",
		"sluice_trigger_chain_seconds":         "trigger chain",
		"sluice_store_ack_seconds":             "store ack",
		"sluice_event_end_to_end_seconds":      "end to end",
	}
	// The node's own metrics; the storage (sluice_store_…) and plugins
	// (sluice_trigger_…) packages register theirs on its registry, and
	// the e2e tests check that a running node serves every one plotted.
	own := map[string]bool{}
	for _, m := range append(slices.Clone(metricDefs), farmMetricDefs...) {
		own[m.name] = true
	}
	reg := prometheus.NewRegistry()
	newLatencies(reg)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		own[f.GetName()] = true
	}
	plotted := map[string]bool{}
	re := regexp.MustCompile(`sluice_[a-z0-9_]+`)
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, m := range re.FindAllString(tg.Expr, -1) {
				m = strings.TrimSuffix(m, "_bucket")
				plotted[m] = true
				if !own[m] && !strings.HasPrefix(m, "sluice_store_") && !strings.HasPrefix(m, "sluice_trigger_") {
					t.Errorf("panel %q plots %s, which the node does not define", p.Title, m)
				}
				if w, ok := owner[m]; ok && !strings.Contains(strings.ToLower(p.Title), w) {
					t.Errorf("panel %q plots %s but its title does not say %q", p.Title, m, w)
				}
				if m == "sluice_store_events_total" || m == "sluice_store_bytes_total" {
					t.Errorf("panel %q plots %s, which the node no longer serves", p.Title, m)
				}
			}
		}
	}
	// Fill-aware deferral is on the dashboard: the beam, the planned
	// fraction and why, the backlog against its cap, and replay in the
	// inter-fill.
	for _, m := range []string{"sluice_fill_beam", "sluice_fill_deferral_fraction", "sluice_fill_plan_reason",
		"sluice_fill_backlog_bytes", "sluice_fill_max_backlog_bytes", "sluice_fill_expected_replay_seconds",
		"sluice_fill_inter_fill_seconds", "sluice_replay_active", "sluice_replay_events_total"} {
		if !plotted[m] {
			t.Errorf("no panel plots %s", m)
		}
	}
}

// The latency histograms count what they say: every event built, every
// batch queued and decided, every store write, every event stored or
// rejected, end to end; /status gives their p50 and p99.
func TestLatencyHistograms(t *testing.T) {
	cfg := testConfig(t, 1)
	in := &fakeInput{sources: []uint32{0, 1, 2, 3, 10, 11}, events: 200, packing: 6, size: 100}
	l, n, err := runNode(t, cfg, &Parts{Inputs: []transport.Input{in}, Finite: []bool{true}, Chain: &fakeChain{}}, nil)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, l.String())
	}
	got := map[string]LatencyStatus{}
	for _, s := range n.Status().Latency {
		got[s.Name] = s
	}
	for name, want := range map[string]uint64{
		"event_build": l.EventsBuilt, "end_to_end_stored": l.EventsStored, "end_to_end_rejected": l.EventsRejected,
	} {
		if s := got[name]; s.Count != want || want == 0 || s.P50 <= 0 || s.P99 < s.P50 {
			t.Errorf("%s: %+v, want %d samples with 0 < p50 <= p99", name, s, want)
		}
	}
	if q, c := got["batch_queue_wait"], got["trigger_chain"]; q.Count == 0 || q.Count != c.Count {
		t.Errorf("queue %+v, chain %+v: want one sample per batch each", q, c)
	}
	if s := got["store_ack"]; s.Count == 0 || s.P99 <= 0 {
		t.Errorf("store_ack %+v", s)
	}
	m := gathered(t, n)
	for _, name := range []string{"sluice_event_build_seconds", "sluice_batch_queue_wait_seconds", "sluice_trigger_chain_seconds",
		"sluice_store_ack_seconds", "sluice_event_end_to_end_seconds"} {
		if m[name] == 0 {
			t.Errorf("%s has no samples", name)
		}
	}
}

func TestQuantile(t *testing.T) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x", Buckets: []float64{1, 2, 4}})
	for _, v := range []float64{0.5, 1.5, 1.5, 3} {
		h.Observe(v)
	}
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	// ranks: 2 of 4 is the middle of bucket (1,2] holding 2 samples: 1.5.
	if q := quantile(m.GetHistogram(), 0.5); q != 1.5 {
		t.Fatalf("p50 %v, want 1.5", q)
	}
	if q := quantile(m.GetHistogram(), 0.99); q < 2 || q > 4 {
		t.Fatalf("p99 %v, want in (2,4]", q)
	}
}
