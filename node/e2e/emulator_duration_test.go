package e2e

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestDurationEndsAtEventBoundary: an emulator limited by a duration
// stops between events: every source of the last event it sent has sent
// it. Paced at 100 events/s for 1 s, the old emulator checked the clock
// before each packet and sent the first source's fragment of event 100
// only, which then waited out builder.behind_wait and ended incomplete.
// Embedded in a node and as `sluice readout --duration` into one, the
// node builds every event complete, 4 fragments each.
func TestDurationEndsAtEventBoundary(t *testing.T) {
	for _, embedded := range []bool{true, false} {
		t.Run(fmt.Sprintf("embedded=%v", embedded), func(t *testing.T) {
			input := "  - {uri: \"tcp://127.0.0.1:0\", expect_streams: 1}\n"
			if embedded {
				input = fmt.Sprintf("  - uri: shm://%s\n    emulator: {duration: 1s, rate: 100, ring_size: 4MiB}\n", shmName(t))
			}
			store := filepath.Join(t.TempDir(), "store")
			cfg := writeConfig(t, "inputs:\n{{IN}}sources:\n  - {name: tracker, sources: \"0-3\"}\nstore: {path: {{STORE}}, min_free_bytes: 256MiB}\nhttp: {address: \"127.0.0.1:0\"}\nlog: {format: json}\n",
				map[string]string{"IN": input, "STORE": store})
			summary := filepath.Join(t.TempDir(), "run.json")
			node := start(t, "run", "--config", cfg, "--summary-json", summary)
			if !embedded {
				ro := start(t, "readout", "--to", "tcp://"+node.listenAddr(t), "--sources", "4", "--connections", "1", "--duration", "1s", "--rate", "100")
				if code := ro.wait(t, time.Minute); code != 0 {
					t.Fatalf("sluice readout: exit %d\n%s\n%s", code, ro.stdout.String(), ro.log())
				}
			}
			if code := node.wait(t, time.Minute); code != 0 {
				t.Fatalf("sluice run: exit %d\n%s", code, node.log())
			}
			l := readLedger(t, summary)
			if !l.Balanced || l.EventsBuilt < 10 || l.EventsIncomplete != 0 || l.FragmentsReceived != 4*l.EventsBuilt {
				t.Fatalf("ledger: %d events built (%d incomplete) of %d fragments, want all complete of 4 fragments: %+v",
					l.EventsBuilt, l.EventsIncomplete, l.FragmentsReceived, l)
			}
		})
	}
}
