package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node"
	"github.com/sluice-daq/sluice/node/peer"
	_ "github.com/sluice-daq/sluice/node/peerinput" // the peer transports this test binary has
)

const peerInputConfig = `
inputs:
  - uri: peer://127.0.0.1:0?transport={{KIND}}
    node: bu-e2e
    farm: e2e
    token: e2e-token
    pool: 16MiB
    max_packet: 1MiB
    expect_streams: 1
    peer_timeout: 5s # make test runs many processes on two cores
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
// goodbye, with a balanced ledger. The sender takes its sources from the
// node's configuration (--config).
func TestPeerInput(t *testing.T) {
	for _, kind := range peer.Names() {
		t.Run(kind, func(t *testing.T) {
			if kind == "ucx" {
				useUCXBinary(t)
				t.Setenv("UCX_TLS", "tcp") // inherited by both processes
				t.Setenv("UCX_NET_DEVICES", "lo")
			}
			const events = 600
			summary := filepath.Join(t.TempDir(), "run.json")
			cfgFile := writeConfig(t, peerInputConfig, map[string]string{
				"KIND": kind, "STORE": filepath.Join(t.TempDir(), "store")})
			node := start(t, "run", "--config", cfgFile, "--summary-json", summary)
			addr := node.listenAddr(t)
			w := start(t, "readout", "--to", fmt.Sprintf("peer://%s?transport=%s", addr, kind),
				"--config", cfgFile, "--events", fmt.Sprint(events), "--packing", "2",
				"--set", "node=ru-e2e", "--set", "farm=e2e", "--set", "token=e2e-token", "--set", "send_ring=4MiB", "--set", "peer_timeout=5s")
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

const peerFastConfig = `
inputs:
  - uri: peer://127.0.0.1:0?transport={{KIND}}
    expect_streams: 1
    peer_timeout: 5s
sources:
  - {name: tracker, sources: "0-3"}
builder: {timeout: 5s}
store: {path: {{STORE}}, min_free_bytes: 256MiB}
http: {address: "127.0.0.1:0"}
log: {format: json}
`

// TestPeerSenderOutrunsNode: `sluice readout` sends small unpacked MFPs
// much faster than the node builds them, so that megabytes are still in
// the sockets (or the node's pool) when the sender has sent its last one
// and closes. The sender must wait until the node confirms it received
// every packet: before the goodbye was confirmed (protocol version 1) the
// sender closed and exited at once, the connection was reset and tens of
// thousands of packets vanished while both sides reported success (the
// node then never saw its stream end, and ran until stopped).
func TestPeerSenderOutrunsNode(t *testing.T) {
	for _, kind := range peer.Names() {
		t.Run(kind, func(t *testing.T) {
			if kind == "ucx" {
				useUCXBinary(t)
				t.Setenv("UCX_TLS", "tcp")
				t.Setenv("UCX_NET_DEVICES", "lo")
			}
			const events = 20000
			summary := filepath.Join(t.TempDir(), "run.json")
			cfgFile := writeConfig(t, peerFastConfig, map[string]string{
				"KIND": kind, "STORE": filepath.Join(t.TempDir(), "store")})
			bu := start(t, "run", "--config", cfgFile, "--summary-json", summary)
			addr := bu.listenAddr(t)
			w := start(t, "readout", "--to", fmt.Sprintf("peer://%s?transport=%s", addr, kind),
				"--config", cfgFile, "--events", fmt.Sprint(events), "--set", "peer_timeout=5s")
			if code := w.wait(t, 2*time.Minute); code != 0 {
				t.Fatalf("sluice readout: exit %d\n%s", code, w.log())
			}
			if code := bu.wait(t, 2*time.Minute); code != 0 {
				t.Fatalf("sluice run: exit %d after its sender said goodbye\n%s", code, bu.log())
			}
			l := readLedger(t, summary)
			if !l.Balanced || l.FragmentsReceived != 4*events || l.EventsBuilt != events || l.EventsIncomplete != 0 {
				t.Fatalf("ledger: %d of %d fragments received, %d events built, %d incomplete, balanced %v",
					l.FragmentsReceived, 4*events, l.EventsBuilt, l.EventsIncomplete, l.Balanced)
			}
		})
	}
}

// TestPeerSenderKilled: a sender SIGKILLed mid-stream is counted by the
// node as a stream lost (inputs[].streams_lost, by reason) and logged at
// WARN naming the peer; the node keeps running (it still expects its
// stream) until it is stopped.
func TestPeerSenderKilled(t *testing.T) {
	for _, kind := range peer.Names() {
		t.Run(kind, func(t *testing.T) {
			if kind == "ucx" {
				useUCXBinary(t)
				t.Setenv("UCX_TLS", "tcp")
				t.Setenv("UCX_NET_DEVICES", "lo")
			}
			cfgFile := writeConfig(t, peerFastConfig, map[string]string{
				"KIND": kind, "STORE": filepath.Join(t.TempDir(), "store")})
			bu := start(t, "run", "--config", cfgFile)
			addr := bu.listenAddr(t)
			http := bu.httpAddr(t)
			w := start(t, "readout", "--to", fmt.Sprintf("peer://%s?transport=%s", addr, kind),
				"--config", cfgFile, "--events", "1000000", "--rate", "200", "--set", "node=ru-killed")
			received := func() (node.InputStatus, bool) {
				s, err := getStatus(t, http)
				if err != nil || len(s.Inputs) != 1 {
					return node.InputStatus{}, false
				}
				return s.Inputs[0], true
			}
			waitFor(t, "packets from the sender", 30*time.Second, func() bool {
				in, ok := received()
				return ok && in.Packets >= 40
			})
			if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			w.wait(t, 30*time.Second)
			waitFor(t, "the lost stream counted", 30*time.Second, func() bool {
				in, ok := received()
				return ok && in.StreamsLost[peer.LostReset] == 1
			})
			waitFor(t, "the loss logged", 10*time.Second, func() bool {
				for _, r := range bu.logRecords("peer sender lost") {
					if r["level"] == "WARN" && r["peer"] == "ru-killed" && r["reason"] == peer.LostReset {
						return true
					}
				}
				return false
			})
			if in, _ := received(); in.StreamsEnded != 0 || in.Done {
				t.Fatalf("input after the kill: %+v", in)
			}
			bu.cmd.Process.Signal(syscall.SIGINT)
			bu.wait(t, time.Minute)
		})
	}
}

// listenAddr waits for the node's log to say where its one network input
// listens (port 0 in the configuration: the port the kernel chose).
func (p *proc) listenAddr(t *testing.T) string {
	t.Helper()
	p.httpAddr(t)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if rs := p.logRecords("input listening"); len(rs) > 0 {
			a, _ := rs[0]["addr"].(string)
			if _, port, err := net.SplitHostPort(a); err != nil || port == "0" {
				t.Fatalf("input listening at %q, want the chosen port", a)
			}
			return a
		}
		select {
		case <-p.done:
			t.Fatalf("sluice ended before its input listened:\n%s", p.log())
		default:
		}
	}
	t.Fatalf("no \"input listening\" logged:\n%s", p.log())
	return ""
}

// ucxBin is the directory of a sluice built with the ucx tag, built once
// by the first test that wants it (a minute on a busy machine).
var ucxBin struct {
	once sync.Once
	dir  string
	err  error
}

// useUCXBinary points the test's processes at a sluice built with the ucx
// tag, for the rest of t.
func useUCXBinary(t *testing.T) {
	t.Helper()
	if !slices.Contains(peer.Names(), "ucx") {
		t.Skip("built without the ucx tag")
	}
	old := bin
	ucxBin.once.Do(func() {
		// Next to the other binaries: TestMain removes them all at the end.
		ucxBin.dir = filepath.Join(old, "ucx")
		cmd := exec.Command("go", "build", "-tags", "ucx", "-o", filepath.Join(ucxBin.dir, "sluice"), "./cmd/sluice")
		cmd.Dir, cmd.Stdout, cmd.Stderr = repo, os.Stderr, os.Stderr
		ucxBin.err = cmd.Run()
	})
	if ucxBin.err != nil {
		t.Fatalf("building sluice with UCX: %v", ucxBin.err)
	}
	bin = ucxBin.dir
	t.Cleanup(func() { bin = old })
}
