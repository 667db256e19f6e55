package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReadoutStreamVersion1: a node builds every event of a real `sluice
// readout --stream-version 1` process (an older sender's stream: no
// alignment, no batched credit), two connections for sources 0-3; /status
// counts the input's streams by version (connections_by_version {"1": 2})
// and the node logs each accepted stream with version 1. The run ends
// balanced, every event whole.
func TestReadoutStreamVersion1(t *testing.T) {
	const events = 300
	summary := filepath.Join(t.TempDir(), "run.json")
	text := strings.Replace(tcpInputConfig, "expect_streams: 1{{MAX}}", "expect_streams: 2", 1)
	cfg := writeConfig(t, text, map[string]string{"STORE": filepath.Join(t.TempDir(), "store")})
	node := start(t, "run", "--config", cfg, "--summary-json", summary)
	addr := node.httpAddr(t)
	input := waitInput(t, node, addr, "the input's address", func(in inputStatus) bool { return in.Address != "" }).Address
	w := start(t, "readout", "--to", "tcp://"+input, "--stream-version", "1", "--events", fmt.Sprint(events),
		"--sources", "4", "--connections", "2", "--rate", "100")
	in := waitInput(t, node, addr, "2 version 1 streams", func(in inputStatus) bool { return in.ByVersion["1"] == 2 })
	if len(in.ByVersion) != 1 {
		t.Fatalf("connections_by_version %v, want only version 1", in.ByVersion)
	}
	if code := w.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("sluice readout --stream-version 1: exit %d\n%s", code, w.log())
	}
	if code := node.wait(t, time.Minute); code != 0 {
		t.Fatalf("sluice run: exit %d\n%s", code, node.log())
	}
	if l := readLedger(t, summary); !l.Balanced || l.EventsBuilt != events || l.EventsIncomplete != 0 || l.EventsStored != events {
		t.Fatalf("ledger %+v", l)
	}
	rec := []string{`"msg":"readout input accepted a stream"`, `"input":"tcp://` + input + `","remote":"127.0.0.1:`, `"version":1,`}
	n := 0
	for _, line := range strings.Split(node.log(), "\n") {
		if strings.Contains(line, rec[0]) && strings.Contains(line, rec[1]) && strings.Contains(line, rec[2]) {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d records with %q, want 2:\n%s", n, rec, node.log())
	}
}
