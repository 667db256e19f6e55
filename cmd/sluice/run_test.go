package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-daq/sluice/node"
	"github.com/sluice-daq/sluice/storage"
)

// writeConfig writes a node config running an embedded synthetic emulator
// over a shared-memory ring unique to the test, with extra YAML appended.
func writeConfig(t *testing.T, extra string) (file, store string) {
	t.Helper()
	dir := t.TempDir()
	store = filepath.Join(dir, "store")
	cfg := fmt.Sprintf(`
run: 12
inputs:
  - uri: shm://sluice-cmdtest-%d
    emulator: {events: 500, packing: 5, fragment_size: {mean: 512}, ring_size: 4MiB}
sources:
  - {name: ecal, sources: "0-3"}
  - {name: muon, sources: "4-5"}
builder: {batch_events: 50, timeout: 200ms}
store: {path: %s, min_free_bytes: 16MiB}
http: {address: "127.0.0.1:0"}
log: {level: warn}
%s`, os.Getpid()^len(t.Name())<<16, store, extra)
	file = filepath.Join(dir, "node.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return file, store
}

func TestRunEmulatorToStoreBalanced(t *testing.T) {
	file, store := writeConfig(t, "")
	summary := filepath.Join(t.TempDir(), "summary.json")
	out, err := run(t, "run", "--config", file, "--run", "77", "--summary-json", summary)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	var s map[string]any
	b, _ := os.ReadFile(summary)
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s["balanced"] != true || s["run"] != float64(77) || s["fragments_received"] != float64(3000) ||
		s["events_built"] != float64(500) || s["events_deferred"] != float64(500) || s["events_stored"] != float64(500) {
		t.Fatalf("summary %s", b)
	}
	if !strings.Contains(out, "balanced") || !strings.Contains(out, "yes") {
		t.Fatalf("ledger table:\n%s", out)
	}
	st, err := storage.Open(storage.Options{Dir: store, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	stats, err := st.Stats()
	if err != nil {
		t.Fatal(err)
	}
	for _, ss := range stats.Streams {
		if ss.Stream == storage.Deferred && (ss.Events != 500 || len(ss.Runs) != 1 || ss.Runs[0] != 77) {
			t.Fatalf("deferred stream %+v", ss)
		}
	}
}

// TestRunReusedRunNumber: a second run with the number of a run that
// ended on the same store is refused (exit 3) before anything opens,
// saying how to go on; with --rerun it runs, warns once at start how many
// events of the run the store holds, and counts the ones it replaced.
func TestRunReusedRunNumber(t *testing.T) {
	file, store := writeConfig(t, "")
	if out, err := run(t, "run", "--config", file, "--run", "77"); err != nil {
		t.Fatalf("first run: %v\n%s", err, out)
	}
	out, err := run(t, "run", "--config", file, "--run", "77")
	if c := exitCode(err); c != exitConfig || !strings.Contains(out, "did not start") ||
		!strings.Contains(err.Error(), "run 77 ended on store "+store+" at ") ||
		!strings.Contains(err.Error(), "with 500 events stored; taking it again would replace them: give a new run number (--run N), another store (--store DIR), or --rerun") {
		t.Fatalf("rerun without --rerun: exit %d, %v\n%s", c, err, out)
	}
	if out, err := run(t, "run", "--config", file, "--run", "78"); err != nil {
		t.Fatalf("the next run number: %v\n%s", err, out)
	}
	summary := filepath.Join(t.TempDir(), "summary.json")
	out, err = run(t, "run", "--config", file, "--run", "77", "--rerun", "--summary-json", summary)
	if err != nil {
		t.Fatalf("rerun with --rerun: %v\n%s", err, out)
	}
	want := "run 77 already has 500 stored events in store " + store + "; events with the same ids will replace them: taking the run again (--rerun)"
	if strings.Count(out, want) != 1 {
		t.Fatalf("want one warning %q:\n%s", want, out)
	}
	var s map[string]any
	b, _ := os.ReadFile(summary)
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s["events_replaced"] != float64(500) || s["balanced"] != true {
		t.Fatalf("summary %s", b)
	}
}

func TestRunRefusesBadConfigBeforeOpening(t *testing.T) {
	file, store := writeConfig(t, `
trigger:
  stages:
    - {name: hlt1, plugin: /nonexistent/plugin}
replay: {rate: -5}
`)
	out, err := run(t, "run", "--config", file)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitConfig {
		t.Fatalf("want exit status %d, got %v\n%s", exitConfig, err, out)
	}
	if !strings.Contains(err.Error(), "replay.rate: -5") {
		t.Fatalf("error does not name replay.rate: %v", err)
	}
	if _, serr := os.Stat(store); !os.IsNotExist(serr) {
		t.Fatalf("the store was created although the config is invalid")
	}
	// Valid statically, but the plugin binary is missing: preflight.
	file, _ = writeConfig(t, "trigger:\n  stages:\n    - {name: hlt1, plugin: /nonexistent/plugin}\n")
	_, err = run(t, "run", "--config", file)
	if !errors.As(err, &ee) || ee.code != exitConfig || !strings.Contains(err.Error(), "trigger.stages[0].plugin") {
		t.Fatalf("missing plugin: %v", err)
	}
	// The same for a stage's shadow plugin (the production one exists:
	// any executable passes preflight).
	file, _ = writeConfig(t, fmt.Sprintf("trigger:\n  stages:\n    - {name: hlt1, plugin: %s, shadow: {plugin: /nonexistent/shadow}}\n", os.Args[0]))
	_, err = run(t, "run", "--config", file)
	if !errors.As(err, &ee) || ee.code != exitConfig || !strings.Contains(err.Error(), "trigger.stages[0].shadow.plugin") ||
		strings.Contains(err.Error(), "trigger.stages[0].plugin") {
		t.Fatalf("missing shadow plugin: %v", err)
	}
}

func TestReplayNeedsAStoreAndAStage(t *testing.T) {
	file, store := writeConfig(t, "")
	_, err := run(t, "replay", "--config", file)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitConfig || !strings.Contains(err.Error(), "run `sluice run` first") {
		t.Fatalf("missing store: got %v", err)
	}
	if _, serr := os.Stat(store); !os.IsNotExist(serr) {
		t.Fatal("replay created the missing store")
	}
	if err := os.MkdirAll(store, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = run(t, "replay", "--config", file)
	if !errors.As(err, &ee) || ee.code != exitConfig || !strings.Contains(err.Error(), "no trigger stage") {
		t.Fatalf("got %v", err)
	}
	if _, err := run(t, "replay", "--config", file, "--rate", "-1"); err == nil || !strings.Contains(err.Error(), "replay.rate: -1") {
		t.Fatalf("negative --rate: %v", err)
	}
	if _, err := run(t, "replay", "--config", file, "--runs", "9-3"); err == nil || !strings.Contains(err.Error(), "--runs") {
		t.Fatalf("bad --runs accepted: %v", err)
	}
}

func TestParseSelection(t *testing.T) {
	sel, err := parseSelection("5-7", "100")
	if err != nil || sel != (storage.Selection{MinRun: 5, MaxRun: 7, MinEvent: 100, MaxEvent: 100}) {
		t.Fatalf("%+v %v", sel, err)
	}
	for _, bad := range [][2]string{{"x", ""}, {"7-5", ""}, {"", "0"}, {"4294967296", ""}} {
		if _, err := parseSelection(bad[0], bad[1]); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// A run that fails before its inputs open (here: its HTTP address is
// taken) says it did not start, with why, instead of an all-zero ledger
// reading "balanced yes"; the summary says so too.
func TestRunThatDidNotStart(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	file, _ := writeConfig(t, "")
	summary := filepath.Join(t.TempDir(), "summary.json")
	out, err := run(t, "run", "--config", file, "--http", l.Addr().String(), "--summary-json", summary)
	if exitCode(err) != exitNotStarted {
		t.Fatalf("run with its HTTP address taken: exit %d (%v), want %d:\n%s", exitCode(err), err, exitNotStarted, out)
	}
	if !strings.Contains(out, "run 12 on ") || !strings.Contains(out, " did not start: http: ") || strings.Contains(out, "balanced") {
		t.Fatalf("output:\n%s", out)
	}
	var s map[string]any
	b, _ := os.ReadFile(summary)
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s["balanced"] != false || !strings.HasPrefix(fmt.Sprint(s["not_started"]), "http: ") {
		t.Fatalf("summary %s", b)
	}
}

// TestReplayRate: the rate and ETA replay shows are the replay's own
// (events over its elapsed time), not a bar's timing of its jumps.
func TestReplayRate(t *testing.T) {
	rate, eta := replayRate(node.ReplaySummary{Selected: 1000, Replayed: 10, DurationSeconds: 0.05})
	if rate != 200 || eta != "5s" {
		t.Fatalf("rate %v, eta %s", rate, eta)
	}
	if rate, eta := replayRate(node.ReplaySummary{Selected: 5}); rate != 0 || eta != "?" {
		t.Fatalf("before the first batch: rate %v, eta %s", rate, eta)
	}
}

// A replay that fails before its first batch (here: another process
// holds the store) says it did not start, and why, instead of an all-zero
// summary reading "balanced ... NO", and exits 4; its JSON says so too.
func TestReplayThatDidNotStart(t *testing.T) {
	pass := buildPlugin(t, "passthrough")
	file, store := writeConfig(t, fmt.Sprintf("trigger:\n  stages:\n    - {name: hlt2, plugin: %s, when: replay}\n", pass))
	if out, err := run(t, "run", "--config", file); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	st, err := storage.Open(storage.Options{Dir: store})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	summary := filepath.Join(t.TempDir(), "replay.json")
	out, err := run(t, "replay", "--config", file, "--summary-json", summary)
	if exitCode(err) != exitNotStarted || !strings.HasPrefix(out, "replay did not start: store ") || strings.Contains(out, "balanced") {
		t.Fatalf("exit %d (%v):\n%s", exitCode(err), err, out)
	}
	var s map[string]any
	b, _ := os.ReadFile(summary)
	if err := json.Unmarshal(b, &s); err != nil || !strings.HasPrefix(fmt.Sprint(s["not_started"]), "store ") {
		t.Fatalf("summary %s (%v)", b, err)
	}
}
