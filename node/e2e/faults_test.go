package e2e

import (
	"fmt"
	"path/filepath"
	"testing"
)

// TestFaultInjection runs the embedded emulator with every fault option
// over the shm ring and over TCP (one fragment per packet, so packets and
// fragments count alike) and reconciles what it sent and injected with
// what the node received, built, discarded and lost, reason by reason.
func TestFaultInjection(t *testing.T) {
	for _, transport := range []string{"shm", "tcp"} {
		t.Run(transport, func(t *testing.T) {
			// The ring holds the whole run: fragments of incomplete events
			// hold their ring space until the timeout. (A TCP sender takes
			// no ring size; its receiver's credit window does that job.)
			uri, sender := "shm://"+shmName(t), "ring_size: 64MiB"
			if transport == "tcp" {
				uri, sender = fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t)), "connections: 0"
			}
			store := filepath.Join(t.TempDir(), "store")
			file := writeConfig(t, `
inputs:
  - uri: {{URI}}
    emulator:
      events: 2000
      packing: 1
      fragment_size: {dist: uniform, min: 100, max: 2000}
      {{SENDER}}
      faults: {drop: 0.01, duplicate: 0.01, corrupt: 0.01, truncate: 0.01, reorder: 0.05, stall: 0.005}
sources:
  - {name: ecal, sources: "0-7"}
  - {name: muon, sources: "8-9"}
builder: {timeout: 2s}  # long enough that only lost fragments leave events incomplete
store: {path: {{STORE}}, min_free_bytes: 256MiB}
http: {address: "127.0.0.1:0"}
log: {format: json}
`, map[string]string{"URI": uri, "STORE": store, "SENDER": sender})
			summary := filepath.Join(t.TempDir(), "run.json")
			runOK(t, "run", "--config", file, "--summary-json", summary)
			l := readLedger(t, summary)
			if !l.Balanced || l.EventsBuilt != 2000 || l.EventsDeferred != 2000 || l.EventsStored != 2000 {
				t.Fatalf("ledger %+v", l)
			}
			if len(l.Emulators) != 1 {
				t.Fatalf("emulator summaries: %+v", l.Emulators)
			}
			e := l.Emulators[0]
			ff := e.FaultFragments
			for _, f := range []string{"drop", "duplicate", "corrupt", "truncate", "reorder", "stall"} {
				if ff[f] == 0 {
					t.Fatalf("fault %s never injected: %v", f, ff)
				}
			}
			var lost uint64
			for _, v := range l.InputLosses {
				lost += v
			}
			// Every fragment sent was received by the builder or lost at
			// the input with its reason (a truncated packet).
			if e.FragmentsSent != l.FragmentsReceived+lost {
				t.Errorf("sent %d != received %d + lost at the input %d (%v)", e.FragmentsSent, l.FragmentsReceived, lost, l.InputLosses)
			}
			if lost != ff["truncate"] {
				t.Errorf("input losses %v, truncated packets %d", l.InputLosses, ff["truncate"])
			}
			if e.FragmentsGenerated != 20000 || e.FragmentsSent != 20000-ff["drop"]+ff["duplicate"] {
				t.Errorf("emulator generated %d, sent %d with %v", e.FragmentsGenerated, e.FragmentsSent, ff)
			}
			// Each duplicate is discarded: as a duplicate, or as late when
			// it came after its event was built.
			if d := l.FragmentsDiscarded; d["duplicate"]+d["late"] < ff["duplicate"] || d["duplicate"] == 0 {
				t.Errorf("discarded %v for %d duplicates sent", d, ff["duplicate"])
			}
			// Dropped and truncated fragments leave events incomplete;
			// corrupted ones are kept and flag their event.
			if l.EventsIncomplete == 0 || l.EventsIncomplete > ff["drop"]+ff["truncate"] {
				t.Errorf("%d incomplete events for %d dropped + %d truncated fragments", l.EventsIncomplete, ff["drop"], ff["truncate"])
			}
			if l.EventsCorrupt == 0 || l.EventsCorrupt > ff["corrupt"] {
				t.Errorf("%d corrupt events for %d corrupted fragments", l.EventsCorrupt, ff["corrupt"])
			}
		})
	}
}
