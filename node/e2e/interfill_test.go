package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node"
)

// replayStatus reads /status's replay section.
func replayStatus(t *testing.T, addr string) node.ReplayStatus {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s struct {
		Replay node.ReplayStatus `json:"replay"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s.Replay
}

// waitFor polls cond every 20 ms for at most limit.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestInterFillReplay: boards (sluice readout over TCP) send a burst and
// pause; once the input has been idle for inter_fill the node replays the
// deferred events (rate-limited), and stops replaying as soon as the next
// burst arrives.
func TestInterFillReplay(t *testing.T) {
	port := freePort(t)
	store := filepath.Join(t.TempDir(), "store")
	file := writeConfig(t, `
run: 41
inputs:
  - {uri: "tcp://127.0.0.1:{{PORT}}", expect_streams: 2}
sources:
  - {name: ecal, sources: "0-3"}
builder: {batch_events: 16, timeout: 2s}
trigger:
  stages:
    - {name: hlt1, plugin: {{BIN}}/plugins/passthrough, deferral: {fraction: 0.5}}
    - {name: hlt2, plugin: {{BIN}}/plugins/passthrough, params: {prescale: "2"}, when: replay}
store: {path: {{STORE}}, min_free_bytes: 256MiB}
replay: {inter_fill: 300ms, rate: 400, batch_events: 16}
http: {address: "127.0.0.1:0"}
log: {format: json}
`, map[string]string{"PORT": strconv.Itoa(port), "BIN": bin, "STORE": store})
	summary := filepath.Join(t.TempDir(), "run.json")
	p := start(t, "run", "--config", file, "--summary-json", summary)
	addr := p.httpAddr(t)
	board := func(first int) {
		t.Helper()
		runOK(t, "readout", "--to", fmt.Sprintf("tcp://127.0.0.1:%d", port), "--groups", "ecal:0-3",
			"--connections", "1", "--events", "1000", "--first-event", strconv.Itoa(first), "--size-dist", "fixed:256")
	}
	board(0)
	// About 500 events were deferred; at 400 events/s a pass lasts > 1 s.
	waitFor(t, "inter-fill replay to start", 30*time.Second, func() bool { return replayStatus(t, addr).Active })
	waitFor(t, "some deferred events to be replayed", 30*time.Second, func() bool { return replayStatus(t, addr).Events >= 64 })
	during := replayStatus(t, addr)
	if !during.Active || during.Events >= 500 {
		t.Fatalf("replay should be under way, rate-limited: %+v", during)
	}
	// The replay chain has no metrics registry (its series would collide
	// with the online stages'); its state comes from the chain itself, so
	// its plugin shows up and working (read from metrics it was all 0).
	if p := during.Plugins; len(p) != 1 || p[0].Stage != "hlt2" || p[0].Instances != 1 || p[0].Up != 1 || p[0].Calls == 0 {
		t.Fatalf("replay plugins %+v", p)
	}
	done := make(chan struct{})
	go func() { board(1000); close(done) }()
	// Data returns: the replay pass stops.
	waitFor(t, "replay to stop when data returned", 10*time.Second, func() bool { return !replayStatus(t, addr).Active })
	<-done
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.log())
	}
	l := readLedger(t, summary)
	if !l.Balanced || l.EventsBuilt != 2000 || l.EventsDeferred < 800 || l.EventsDeferred > 1200 {
		t.Fatalf("ledger %+v", l)
	}
	// What replay decided left the deferred stream: the store holds the
	// run's deferred events minus those replayed (accepted ones moved to
	// the accepted stream with the replayed status, the others removed).
	st := storeStat(t, store)
	// Replay only ever saw the first burst's ~500 deferred events.
	if st["deferred"] >= l.EventsStoredDeferred || st["deferred"]+650 < l.EventsStoredDeferred {
		t.Fatalf("store %v after a partial inter-fill replay of a run that deferred %d", st, l.EventsStoredDeferred)
	}
	if st["accepted"] <= l.EventsStoredAccepted {
		t.Fatalf("no replayed event in the accepted stream: store %v, online accepted %d", st, l.EventsStoredAccepted)
	}
	if st["accepted"]-l.EventsStoredAccepted+st["deferred"] > l.EventsStoredDeferred {
		t.Fatalf("replay created events: store %v, run stored %d+%d", st, l.EventsStoredAccepted, l.EventsStoredDeferred)
	}
}
