package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/emulator"
)

// TestEmulatorEventsZeroUntilStopped: `events: 0` means what the config
// comment says, until stopped: an embedded emulator, and `sluice readout
// --events 0` into a node, send past the 1000 events the emulator used to
// stop at, until SIGTERM; then the signalled process exits 0 and the node's
// ledger balances. (Before, both stopped after 1000 events.)
func TestEmulatorEventsZeroUntilStopped(t *testing.T) {
	const past = 1500 // events stored before the signal: more than the old 1000
	for _, embedded := range []bool{true, false} {
		t.Run(fmt.Sprintf("embedded=%v", embedded), func(t *testing.T) {
			input := "  - {uri: \"tcp://127.0.0.1:0\", expect_streams: 1}\n"
			if embedded {
				input = fmt.Sprintf("  - uri: shm://%s\n    emulator: {events: 0, rate: 2000, ring_size: 4MiB}\n", shmName(t))
			}
			store := filepath.Join(t.TempDir(), "store")
			cfg := writeConfig(t, "inputs:\n{{IN}}sources:\n  - {name: tracker, sources: \"0-3\"}\nstore: {path: {{STORE}}, min_free_bytes: 256MiB}\nhttp: {address: \"127.0.0.1:0\"}\nlog: {format: json}\n",
				map[string]string{"IN": input, "STORE": store})
			summary := filepath.Join(t.TempDir(), "run.json")
			node := start(t, "run", "--config", cfg, "--summary-json", summary)
			signalled := node
			var roSummary string
			if !embedded {
				roSummary = filepath.Join(t.TempDir(), "readout.json")
				signalled = start(t, "readout", "--to", "tcp://"+node.listenAddr(t), "--sources", "4", "--connections", "1",
					"--events", "0", "--rate", "2000", "--summary-json", roSummary)
			}
			waitStored(t, node, node.httpAddr(t), past)
			select {
			case <-signalled.done:
				t.Fatalf("the emulator ended by itself:\n%s\n%s", signalled.stdout.String(), signalled.log())
			default:
			}
			if err := signalled.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := signalled.wait(t, time.Minute); code != 0 {
				t.Fatalf("sluice %s after SIGTERM: exit %d\n%s\n%s", signalled.cmd.Args[1], code, signalled.stdout.String(), signalled.log())
			}
			if !embedded {
				var sum emulator.Summary
				b, err := os.ReadFile(roSummary)
				if err == nil {
					err = json.Unmarshal(b, &sum)
				}
				if err != nil {
					t.Fatal(err)
				}
				if sum.FragmentsSent < 4*past {
					t.Fatalf("sluice readout --events 0 sent %d fragments, want >= %d (%d events of 4 sources)", sum.FragmentsSent, 4*past, past)
				}
				if code := node.wait(t, time.Minute); code != 0 {
					t.Fatalf("sluice run: exit %d\n%s", code, node.log())
				}
			}
			l := readLedger(t, summary)
			if !l.Balanced || l.EventsBuilt < past {
				t.Fatalf("ledger: %d events built, balanced %v; want >= %d, balanced: %+v", l.EventsBuilt, l.Balanced, past, l)
			}
			t.Logf("%d events built before the signal ended the run", l.EventsBuilt)
		})
	}
}
