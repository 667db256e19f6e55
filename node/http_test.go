package node

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

type fakeControl struct {
	state atomic.Int32
	stops atomic.Int32
}

func (f *fakeControl) Status() Status {
	l := balancedLedger()
	l.InputLosses = map[string]uint64{"udp://127.0.0.1:9000/lost": 3, "file:///data/runs/run7.mfp/decode": 2}
	l.Lines = map[string]uint64{"hlt1/quiet": 8}
	return Status{
		Node: "n1", State: State(f.state.Load()), Run: 7,
		Buffers: Buffers{QueueBatches: 2, QueueCapacity: 4, MemoryBudgetBytes: 256 << 20},
		Inputs: []InputStatus{{URI: "shm://r", Packets: 10, Bytes: 1000}, {URI: "file:///data/runs/run7.mfp", Done: true},
			{URI: "tcp://127.0.0.1:7000", Address: "127.0.0.1:7000", Open: 1, ConnectionsClosed: map[string]uint64{"preamble_timeout": 4}}},
		Plugins: []PluginStatus{{Stage: "hlt1", Plugin: "gec", Binary: "bin/plugins/gec", Instances: 2, Up: 2, Restarts: 1}},
		Store:   StoreStatus{Path: "./data", HeadroomBytes: 1 << 30, Writable: true},
		Replay:  ReplayStatus{Enabled: true, Plugins: []PluginStatus{{Stage: "hlt2", Plugin: "gec", Binary: "bin/plugins/gec", Instances: 1, Up: 1, Calls: 3}}},
		Ledger:  l,
	}
}

func (f *fakeControl) Stop() { f.stops.Add(1); f.state.Store(int32(StateDraining)) }

func startTestHTTP(t *testing.T, f *fakeControl) string {
	t.Helper()
	return startAccessHTTP(t, f, "127.0.0.1:0", httpAccess{Loopback: true, ShowPaths: true}, slog.New(slog.DiscardHandler))
}

// startAccessHTTP serves f's endpoints on addr with acc and returns the
// base URL, on 127.0.0.1 whatever addr binds to.
func startAccessHTTP(t *testing.T, f *fakeControl, addr string, acc httpAccess, log *slog.Logger) string {
	t.Helper()
	reg := newRegistry(f.Status)
	s, err := startHTTP(addr, acc, newHTTPHandler(reg, f, acc, log), log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.shutdown)
	_, port, _ := net.SplitHostPort(s.Addr())
	return "http://127.0.0.1:" + port
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestMetricsPassPromlint(t *testing.T) {
	f := &fakeControl{}
	f.state.Store(int32(StateRunning))
	base := startTestHTTP(t, f)
	code, body := get(t, base+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	for _, w := range []string{
		`sluice_run_state{state="running"} 1`,
		`sluice_fragments_discarded_total{reason="duplicate"} 6`,
		`sluice_fragments_suspect_total{source="12"} 1`,
		`sluice_builder_resyncs_total 1`,
		`sluice_source_event_id_resets_total{source="40"} 2`,
		`sluice_events_decided_total{decision="defer"} 30`,
		`sluice_events_stored_total{stream="deferred"} 29`,
		`sluice_input_losses_total{input="udp://127.0.0.1:9000",reason="lost"} 3`,
		`sluice_queue_batches 2`,
		`sluice_input_connections_closed_total{input="tcp://127.0.0.1:7000",reason="preamble_timeout"} 4`,
		"go_goroutines", "process_resident_memory_bytes",
		// The two byte counts say what they count: whole packets as they
		// arrived per input, and the fragment payloads into the builder.
		`sluice_input_wire_bytes_total{input="shm://r"} 1000`,
		"# HELP sluice_input_wire_bytes_total Bytes received per input as they arrived: whole multi-fragment packets",
		"# HELP sluice_fragment_payload_bytes_total Payload bytes of the fragments handed to the event builder: fragment and multi-fragment packet headers excluded",
	} {
		if !strings.Contains(body, w) {
			t.Errorf("/metrics lacks %q", w)
		}
	}
	for _, old := range []string{"sluice_received_bytes_total", "sluice_input_received_bytes_total"} {
		if strings.Contains(body, old) {
			t.Errorf("/metrics still has the ambiguous %s", old)
		}
	}
}

func TestHTTPEndpoints(t *testing.T) {
	f := &fakeControl{}
	f.state.Store(int32(StateConfigured))
	base := startTestHTTP(t, f)
	if code, _ := get(t, base+"/healthz"); code != 200 {
		t.Fatalf("/healthz %d", code)
	}
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "configured") {
		t.Fatalf("/readyz before running: %d %q", code, body)
	}
	f.state.Store(int32(StateRunning))
	if code, _ := get(t, base+"/readyz"); code != 200 {
		t.Fatalf("/readyz running: %d", code)
	}
	code, body := get(t, base+"/status")
	var st map[string]any
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil {
		t.Fatalf("/status %d %v", code, err)
	}
	if st["state"] != "running" || st["run"] != float64(7) || st["plugins"].([]any)[0].(map[string]any)["instances"] != float64(2) ||
		st["store"].(map[string]any)["headroom_bytes"] != float64(1<<30) {
		t.Fatalf("/status = %s", body)
	}
	if code, _ := get(t, base+"/run/stop"); code != http.StatusMethodNotAllowed {
		t.Fatalf("GET /run/stop: %d, want 405", code)
	}
	resp, err := http.Post(base+"/run/stop", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || f.stops.Load() != 1 || State(f.state.Load()) != StateDraining {
		t.Fatalf("POST /run/stop: %d, stops %d", resp.StatusCode, f.stops.Load())
	}
}
