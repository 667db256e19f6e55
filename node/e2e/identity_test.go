package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFarAheadEventID: one board (`sluice readout`, one source) sends a
// single valid packet with a far-ahead event id; once the node has built
// it (its timeout passed), 16 boards send events 0..999. The one packet
// must not make the 16 000 fragments that follow "late": the 1000 events
// build complete.
func TestFarAheadEventID(t *testing.T) {
	for _, id := range []string{"5000", "9223372036854775808"} {
		t.Run(id, func(t *testing.T) {
			port := freePort(t)
			to := fmt.Sprintf("tcp://127.0.0.1:%d", port)
			file := writeConfig(t, `
inputs:
  - {uri: "{{URI}}", expect_streams: 5}
sources:
  - {name: all, sources: "0-15"}
builder: {timeout: 2s, batch_events: 64}  # long enough that connections skewed under load still meet
store: {path: {{STORE}}, min_free_bytes: 256MiB}
http: {address: "127.0.0.1:0"}
log: {format: json}
`, map[string]string{"URI": to, "STORE": filepath.Join(t.TempDir(), "store")})
			summary := filepath.Join(t.TempDir(), "run.json")
			p := start(t, "run", "--config", file, "--summary-json", summary)
			addr := p.httpAddr(t)
			runOK(t, "readout", "--to", to, "--groups", "bad:3", "--events", "1", "--first-event", id)
			waitFor(t, "the far-ahead event to be built", 30*time.Second, func() bool {
				s, err := getStatus(t, addr)
				return err == nil && s.Ledger.EventsBuilt == 1
			})
			runOK(t, "readout", "--to", to, "--sources", "16", "--connections", "4", "--events", "1000")
			if code := p.wait(t, 60*time.Second); code != 0 {
				t.Fatalf("exit %d:\n%s", code, p.log())
			}
			l := readLedger(t, summary)
			if !l.Balanced || l.FragmentsReceived != 16001 {
				t.Fatalf("ledger %+v", l)
			}
			if l.EventsComplete != 1000 || l.FragmentsDiscarded["late"] != 0 {
				t.Fatalf("after one packet with event id %s: %d events complete (want 1000), %d fragments late (want 0); ledger %+v",
					id, l.EventsComplete, l.FragmentsDiscarded["late"], l)
			}
			// Sent before any other source, it had no reference to be
			// judged by: built alone, incomplete, and harmless.
			if l.EventsBuilt != 1001 || l.EventsIncomplete != 1 {
				t.Fatalf("ledger %+v", l)
			}
		})
	}
}

// TestCounterReset: four boards send events 0..69 999, then every board's
// event counter resets (a resync) and they send 0..999 again. The events
// after the reset build complete.
func TestCounterReset(t *testing.T) {
	port := freePort(t)
	to := fmt.Sprintf("tcp://127.0.0.1:%d", port)
	file := writeConfig(t, `
inputs:
  - {uri: "{{URI}}", expect_streams: 2}
sources:
  - {name: all, sources: "0-3"}
builder: {timeout: 500ms}
store: {path: {{STORE}}, min_free_bytes: 256MiB}
http: {address: "127.0.0.1:0"}
log: {format: json}
`, map[string]string{"URI": to, "STORE": filepath.Join(t.TempDir(), "store")})
	summary := filepath.Join(t.TempDir(), "run.json")
	p := start(t, "run", "--config", file, "--summary-json", summary)
	p.httpAddr(t)
	runOK(t, "readout", "--to", to, "--sources", "4", "--connections", "1", "--events", "70000", "--size-dist", "fixed:16")
	runOK(t, "readout", "--to", to, "--sources", "4", "--connections", "1", "--events", "1000", "--size-dist", "fixed:16")
	if code := p.wait(t, 120*time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.log())
	}
	l := readLedger(t, summary)
	if !l.Balanced || l.FragmentsReceived != 4*71000 {
		t.Fatalf("ledger %+v", l)
	}
	if l.EventsComplete != 71000 || l.FragmentsDiscarded["late"] != 0 {
		t.Fatalf("after a counter reset: %d events complete (want 71000), %d fragments late (want 0); ledger %+v",
			l.EventsComplete, l.FragmentsDiscarded["late"], l)
	}
	if l.Resyncs != 1 || !strings.Contains(p.log(), "event counter reset (resync) detected") {
		t.Fatalf("resyncs %d; log:\n%s", l.Resyncs, p.log())
	}
	// The event_id column carries the id only: the store, keyed by (run,
	// event id), keeps the later of two events with one id, and says so.
	if l.EventsReplaced != 1000 || l.EventsStored != 71000 {
		t.Fatalf("stored %d, replaced %d", l.EventsStored, l.EventsReplaced)
	}
}

// TestSuspectIDMidRun: while 16 boards send, one more sends a single packet
// for source 5 with event id 2^40. It is held apart, never confirmed and
// discarded as suspect_id for source 5 (ledger, metrics, log); every event
// of the 16 builds complete.
func TestSuspectIDMidRun(t *testing.T) {
	port := freePort(t)
	to := fmt.Sprintf("tcp://127.0.0.1:%d", port)
	file := writeConfig(t, `
inputs:
  - {uri: "{{URI}}", expect_streams: 5}
sources:
  - {name: all, sources: "0-15"}
builder: {timeout: 2s, batch_events: 64}  # long enough that connections skewed under load still meet
store: {path: {{STORE}}, min_free_bytes: 256MiB}
http: {address: "127.0.0.1:0"}
log: {format: json}
`, map[string]string{"URI": to, "STORE": filepath.Join(t.TempDir(), "store")})
	summary := filepath.Join(t.TempDir(), "run.json")
	p := start(t, "run", "--config", file, "--summary-json", summary)
	addr := p.httpAddr(t)
	boards := start(t, "readout", "--to", to, "--sources", "16", "--connections", "4", "--events", "4000", "--rate", "1000")
	waitFor(t, "200 events built", 30*time.Second, func() bool {
		s, err := getStatus(t, addr)
		return err == nil && s.Ledger.EventsBuilt >= 200
	})
	runOK(t, "readout", "--to", to, "--groups", "bad:5", "--events", "1", "--first-event", "1099511627776")
	waitFor(t, "the suspect fragment to be discarded", 30*time.Second, func() bool {
		s, err := getStatus(t, addr)
		return err == nil && s.Ledger.FragmentsDiscarded["suspect_id"] == 1
	})
	metrics, err := httpGet("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(metrics), `sluice_fragments_suspect_total{source="5"} 1`) {
		t.Errorf("/metrics lacks the suspect fragment of source 5")
	}
	if code := boards.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("readout exit %d:\n%s", code, boards.log())
	}
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.log())
	}
	l := readLedger(t, summary)
	if !l.Balanced || l.FragmentsReceived != 16*4000+1 || l.EventsComplete != 4000 || l.EventsBuilt != 4000 {
		t.Fatalf("ledger %+v", l)
	}
	if l.FragmentsDiscarded["suspect_id"] != 1 || l.FragmentsSuspect[5] != 1 || len(l.FragmentsSuspect) != 1 || l.FragmentsDiscarded["late"] != 0 {
		t.Fatalf("discarded %v, suspect by source %v", l.FragmentsDiscarded, l.FragmentsSuspect)
	}
	if !strings.Contains(p.log(), `"source":5,"event_id":1099511627776`) {
		t.Errorf("no log record of the suspect fragment:\n%s", p.log())
	}
}
