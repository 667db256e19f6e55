package node

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

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
	}
	re := regexp.MustCompile(`sluice_[a-z0-9_]+`)
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, m := range re.FindAllString(tg.Expr, -1) {
				m = strings.TrimSuffix(m, "_bucket")
				if w, ok := owner[m]; ok && !strings.Contains(strings.ToLower(p.Title), w) {
					t.Errorf("panel %q plots %s but its title does not say %q", p.Title, m, w)
				}
				if m == "sluice_store_events_total" || m == "sluice_store_bytes_total" {
					t.Errorf("panel %q plots %s, which the node no longer serves", p.Title, m)
				}
			}
		}
	}
}
