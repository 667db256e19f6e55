package e2e

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const shmInputConfig = `
inputs:
  - uri: shm://{{SHM}}
sources:
  - {name: tracker, sources: "0-3"}
builder: {timeout: 1s}
store: {path: {{STORE}}, min_free_bytes: 256MiB}
http: {address: "127.0.0.1:0"}
log: {format: json}
`

// TestShmInputEndsWithItsWriter: a node reading a ring that a separate
// `sluice readout --events N` process writes drains once the writer closed
// the ring after its last packet, and exits 0 on its own with every event
// built and a balanced ledger.
func TestShmInputEndsWithItsWriter(t *testing.T) {
	const events = 600
	shm := shmName(t)
	summary := filepath.Join(t.TempDir(), "run.json")
	node := start(t, "run", "--config", writeConfig(t, shmInputConfig, map[string]string{"SHM": shm, "STORE": filepath.Join(t.TempDir(), "store")}),
		"--summary-json", summary)
	node.httpAddr(t) // running: the input waits for the ring
	w := start(t, "readout", "--to", "shm://"+shm, "--events", "600", "--sources", "4", "--packing", "2", "--ring-size", "4194304")
	if code := w.wait(t, time.Minute); code != 0 {
		t.Fatalf("sluice readout: exit %d\n%s", code, w.log())
	}
	if code := node.wait(t, time.Minute); code != 0 {
		t.Fatalf("sluice run: exit %d after its writer ended\n%s", code, node.log())
	}
	l := readLedger(t, summary)
	if !l.Balanced || l.EventsBuilt != events || l.EventsIncomplete != 0 || l.EventsStored != events || l.FragmentsReceived != 4*events {
		t.Fatalf("ledger %+v", l)
	}
}

// TestShmWriterCrashFailsRun: a writer killed mid-stream never closes its
// ring; the node reports it (shm.ErrWriterDead), drains what it
// received and exits non-zero, its ledger still balanced.
func TestShmWriterCrashFailsRun(t *testing.T) {
	shm := shmName(t)
	summary := filepath.Join(t.TempDir(), "run.json")
	node := start(t, "run", "--config", writeConfig(t, shmInputConfig, map[string]string{"SHM": shm, "STORE": filepath.Join(t.TempDir(), "store")}),
		"--summary-json", summary)
	addr := node.httpAddr(t)
	w := start(t, "readout", "--to", "shm://"+shm, "--duration", "5m", "--sources", "4", "--rate", "2000", "--ring-size", "4194304")
	waitStored(t, node, addr, 200)
	if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	w.wait(t, 30*time.Second)
	code := node.wait(t, time.Minute)
	if code == 0 || !strings.Contains(node.log(), "readout ring writer is dead") {
		t.Fatalf("sluice run: exit %d after its writer was killed, want non-zero naming the dead writer\n%s", code, node.log())
	}
	if l := readLedger(t, summary); !l.Balanced || l.EventsBuilt < 200 {
		t.Fatalf("ledger %+v", l)
	}
}
