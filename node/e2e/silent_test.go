package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node"
)

// statusOf is GET /status as the node's own type.
func statusOf(addr string) (node.Status, error) {
	var s node.Status
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

// TestSilentSourcesAbsentAndStreams: a TCP input expecting 4 streams gets
// 2 (one board, sources 0-3, paced for ~2 s) while sources 4-7 stay silent.
// /status shows 2 connections of 4 expected streams; with
// warnings.silent_absent the silent sources are treated as absent, so
// events are built while the run goes on (the builder timeout is an hour:
// without it nothing would be built before the drain). The second board
// then sends for 4-7: they are waited for again, its 2 streams end the
// input and the run balances.
func TestSilentSourcesAbsentAndStreams(t *testing.T) {
	port := freePort(t)
	to := fmt.Sprintf("tcp://127.0.0.1:%d", port)
	file := writeConfig(t, `
inputs:
  - {uri: "{{URI}}", expect_streams: 4}
sources:
  - {name: a, sources: "0-3"}
  - {name: b, sources: "4-7"}
builder: {timeout: 1h, batch_events: 16}
warnings: {silent_after: 500ms, silent_absent: true}
store: {path: {{STORE}}, min_free_bytes: 256MiB}
http: {address: "127.0.0.1:0"}
log: {format: json}
`, map[string]string{"URI": to, "STORE": filepath.Join(t.TempDir(), "store")})
	summary := filepath.Join(t.TempDir(), "run.json")
	p := start(t, "run", "--config", file, "--summary-json", summary)
	addr := p.httpAddr(t)
	first := start(t, "readout", "--to", to, "--groups", "a:0-3", "--connections", "2", "--rate", "200", "--events", "400")
	var during node.Status
	waitFor(t, "events built while sources 4-7 are silent", 60*time.Second, func() bool {
		s, err := statusOf(addr)
		if err != nil || len(s.Inputs) != 1 {
			return false
		}
		during = s
		// Sources leave the silent list when the decide stage sees them in
		// an event, after the builder counted it: the events built while
		// 0-3 are still listed are in the queue.
		return s.Ledger.EventsBuilt >= 50 && s.Inputs[0].Open == 2 && s.Warnings.SilentSources == "4-7"
	})
	if in := during.Inputs[0]; in.StreamsExpected != 4 || in.Open != 2 || in.Done {
		t.Fatalf("/status inputs[0] = %+v, want 2 connections open of 4 streams expected", in)
	}
	if w := during.Warnings; w.SilentSources != "4-7" || w.AbsentSources != "4-7" {
		t.Fatalf("/status warnings = %+v, want silent and absent 4-7", w)
	}
	if code := first.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("first board: exit %d\n%s", code, first.log())
	}
	waitFor(t, "the first board's 2 streams to end", 30*time.Second, func() bool {
		s, err := statusOf(addr)
		return err == nil && len(s.Inputs) == 1 && s.Inputs[0].StreamsEnded == 2 && s.State == node.StateRunning
	})
	runOK(t, "readout", "--to", to, "--groups", "b:4-7", "--connections", "2", "--events", "10", "--first-event", "1000")
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("node: exit %d\n%s", code, p.log())
	}
	l := readLedger(t, summary)
	// Events 0-399 without 4-7; 1000-1009: 4-7 came back and are waited
	// for again, so those ten are built at the drain, incomplete (0-3 sent
	// none of them).
	if !l.Balanced || l.EventsBuilt != 410 || l.EventsIncomplete != 410 || l.FragmentsDiscarded["late"] != 0 {
		t.Fatalf("ledger: %+v", l)
	}
	log := p.log()
	for _, want := range []string{
		`"msg":"sources silent: `, // in no event built, or no event built (the board started late)
		`since the inputs opened; treated as absent: events no longer wait for them (warnings.silent_absent)"`,
		`"absent":"4-7"`, // sources 0-7 or 4-7: 0-3 may be in no event yet
	} {
		if !strings.Contains(log, want) {
			t.Fatalf("node log lacks %s:\n%s", want, log)
		}
	}
}

// TestEmulatorFileLacksSources: configs/demo.yaml with three sources its
// emulator's file does not have. They are named at start, and with
// warnings.silent_absent treated as absent at once: events are built while
// the emulator still sends (a builder timeout of an hour would otherwise
// hold every one of them until the drain).
func TestEmulatorFileLacksSources(t *testing.T) {
	file, _ := demoConfig(t, "60")
	text := readFile(t, file)
	for old, repl := range map[string]string{
		`  - {name: header, sources: "16777216"}`: `  - {name: header, sources: "16777216"}` + "\n" + `  - {name: ghost, sources: "9000000-9000002"}`,
		"timeout: 10s": "timeout: 1h",
	} {
		if !strings.Contains(text, old) {
			t.Fatalf("configs/demo.yaml no longer contains %q", old)
		}
		text = strings.Replace(text, old, repl, 1)
	}
	text += "\nwarnings: {silent_absent: true}\n"
	text = strings.Replace(text, "      loop: 60", "      loop: 60\n      rate: 100", 1)
	file = writeConfig(t, text, nil)
	summary := filepath.Join(t.TempDir(), "run.json")
	p := start(t, "run", "--config", file, "--summary-json", summary)
	addr := p.httpAddr(t)
	waitFor(t, "events built while the emulator sends", 60*time.Second, func() bool {
		s, err := statusOf(addr)
		return err == nil && s.State == node.StateRunning && len(s.Inputs) == 1 && !s.Inputs[0].Done && s.Ledger.EventsBuilt >= 20 &&
			s.Warnings.NotInEmulatorFile == "9000000-9000002" && s.Warnings.AbsentSources == "9000000-9000002"
	})
	if code := p.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("node: exit %d\n%s", code, p.log())
	}
	if l := readLedger(t, summary); !l.Balanced || l.EventsBuilt != 600 || l.EventsIncomplete != 600 {
		t.Fatalf("ledger: %+v", l)
	}
	log := p.log()
	for _, want := range []string{
		`"msg":"configured sources not in the emulator's file: treated as absent, events do not wait for them (warnings.silent_absent)"`,
		`"sources":"9000000-9000002","count":3`,
		`"absent":"9000000-9000002"`,
	} {
		if !strings.Contains(log, want) {
			t.Fatalf("node log lacks %s:\n%s", want, log)
		}
	}
	if strings.Contains(log, "events wait builder.timeout") {
		t.Fatalf("the node warns that events wait for sources it treats as absent:\n%s", log)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
