package e2e

import (
	"fmt"
	"path/filepath"
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
builder: {timeout: 200ms, batch_events: 64}
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
}
