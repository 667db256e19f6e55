package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/peer"
	_ "github.com/sluice-daq/sluice/node/peerinput" // the peer transports this test binary has
)

const peerInputConfig = `
inputs:
  - uri: peer://127.0.0.1:{{PORT}}?transport={{KIND}}
    node: bu-e2e
    farm: e2e
    token: e2e-token
    pool: 16MiB
    max_packet: 1MiB
    expect_streams: 1
sources:
  - {name: tracker, sources: "0-3"}
builder: {timeout: 1s}
store: {path: {{STORE}}, min_free_bytes: 256MiB}
http: {address: "127.0.0.1:0"}
log: {format: json}
`

// TestPeerInput: a node with a peer input receives the MFPs a separate
// `sluice readout --to peer://...` process sends over each peer transport
// (ucx when this test was built with the ucx tag: then a sluice binary with
// UCX is built for it), builds every event and ends, once the sender said
// goodbye, with a balanced ledger.
func TestPeerInput(t *testing.T) {
	for _, kind := range peer.Names() {
		t.Run(kind, func(t *testing.T) {
			if kind == "ucx" {
				useUCXBinary(t)
				t.Setenv("UCX_TLS", "tcp") // inherited by both processes
				t.Setenv("UCX_NET_DEVICES", "lo")
			}
			const events = 600
			port := freePort(t)
			summary := filepath.Join(t.TempDir(), "run.json")
			node := start(t, "run", "--config", writeConfig(t, peerInputConfig, map[string]string{
				"PORT": fmt.Sprint(port), "KIND": kind, "STORE": filepath.Join(t.TempDir(), "store")}),
				"--summary-json", summary)
			node.httpAddr(t) // listening
			w := start(t, "readout", "--to", fmt.Sprintf("peer://127.0.0.1:%d?transport=%s", port, kind),
				"--events", fmt.Sprint(events), "--packing", "2",
				"--set", "node=ru-e2e", "--set", "farm=e2e", "--set", "token=e2e-token", "--set", "send_ring=4MiB")
			if code := w.wait(t, time.Minute); code != 0 {
				t.Fatalf("sluice readout: exit %d\n%s", code, w.log())
			}
			if code := node.wait(t, time.Minute); code != 0 {
				t.Fatalf("sluice run: exit %d after its sender said goodbye\n%s", code, node.log())
			}
			l := readLedger(t, summary)
			if !l.Balanced || l.EventsBuilt != events || l.EventsIncomplete != 0 || l.EventsStored != events || l.FragmentsReceived != 4*events {
				t.Fatalf("ledger %+v", l)
			}
		})
	}
}

// useUCXBinary points the test's processes at a sluice built with the ucx
// tag, for the rest of t.
func useUCXBinary(t *testing.T) {
	t.Helper()
	if !slices.Contains(peer.Names(), "ucx") {
		t.Skip("built without the ucx tag")
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-tags", "ucx", "-o", filepath.Join(dir, "sluice"), "./cmd/sluice")
	cmd.Dir, cmd.Stdout, cmd.Stderr = repo, os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("building sluice with UCX: %v", err)
	}
	old := bin
	bin = dir
	t.Cleanup(func() { bin = old })
}
