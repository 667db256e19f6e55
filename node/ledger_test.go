package node

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/emulator"
)

func balancedLedger() Ledger {
	return Ledger{
		Run: 7, Node: "n1",
		FragmentsReceived: 1000, FragmentsInEvents: 990,
		FragmentsDiscarded: map[string]uint64{"duplicate": 6, "late": 3, "suspect_id": 1},
		FragmentsSuspect:   map[uint32]uint64{12: 1}, Resyncs: 1, CounterResets: map[uint32]uint64{40: 2},
		EventsBuilt: 100, EventsIncomplete: 3,
		EventsAccepted: 10, EventsRejected: 60, EventsDeferred: 30,
		DeferredBy:   map[string]uint64{"fraction": 30},
		EventsStored: 39, EventsStoredAccepted: 10, EventsStoredDeferred: 29,
		EventsDropped: map[string]uint64{"store_error": 1},
	}
}

func TestLedgerBalance(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Ledger)
		want   string // "" = balanced; else a fragment of the imbalance
	}{
		{"balanced", func(*Ledger) {}, ""},
		{"fragment lost silently", func(l *Ledger) { l.FragmentsReceived++ }, "fragments: received 1001 != in events 990 + discarded 10 + open 0"},
		{"open fragments at the end", func(l *Ledger) { l.FragmentsOpen = 5; l.FragmentsInEvents -= 5 }, "5 still open after the run stopped"},
		{"event without decision", func(l *Ledger) { l.EventsBuilt++ }, "events: built 101 != accepted 10 + rejected 60 + deferred 30 + in flight 0"},
		{"kept event not stored", func(l *Ledger) { l.EventsDropped = nil }, "accepted 10 + deferred 30 != stored 39 + dropped 0 + unacknowledged 0"},
		{"streams disagree", func(l *Ledger) { l.EventsStoredAccepted++; l.EventsStoredDeferred++ }, "store: stored 39 != accepted stream 11 + deferred stream 30"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := balancedLedger()
			tc.mutate(&l)
			l.Check(true)
			if tc.want == "" {
				if !l.Balanced || len(l.Imbalance) != 0 {
					t.Fatalf("want balanced, got %v", l.Imbalance)
				}
				return
			}
			if l.Balanced || !strings.Contains(strings.Join(l.Imbalance, "\n"), tc.want) {
				t.Fatalf("want imbalance %q, got balanced=%v %v", tc.want, l.Balanced, l.Imbalance)
			}
		})
	}
	// During the run open fragments, events in flight and writes not yet
	// durable are expected; at the end they are not.
	l := balancedLedger()
	l.FragmentsOpen, l.FragmentsInEvents = 5, 985
	l.EventsBuilt, l.EventsInFlight = 104, 4
	l.EventsStored, l.EventsStoredDeferred, l.EventsUnacked = 37, 27, 2
	if l.Check(false); !l.Balanced {
		t.Fatalf("live ledger: %v", l.Imbalance)
	}
	if l.Check(true); l.Balanced || len(l.Imbalance) != 3 {
		t.Fatalf("final ledger with open/in-flight/unacked: %v", l.Imbalance)
	}
}

func TestLedgerJSONFields(t *testing.T) {
	l := balancedLedger()
	l.Check(true)
	p := filepath.Join(t.TempDir(), "s.json")
	if err := l.WriteJSON(p); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"run", "fragments_received", "fragments_in_events", "fragments_discarded", "events_built",
		"events_incomplete", "events_accepted", "events_rejected", "events_deferred", "events_stored", "bytes_received",
		"input_bytes", "stages", "duration_seconds", "balanced", "resyncs", "fragments_suspect_by_source", "counter_resets_by_source"} {
		if _, ok := m[k]; !ok {
			t.Errorf("summary JSON lacks %q", k)
		}
	}
	if m["balanced"] != true || m["fragments_discarded"].(map[string]any)["duplicate"] != float64(6) ||
		m["fragments_suspect_by_source"].(map[string]any)["12"] != float64(1) ||
		m["counter_resets_by_source"].(map[string]any)["40"] != float64(2) {
		t.Fatalf("summary = %s", b)
	}
}

func TestLedgerTable(t *testing.T) {
	l := balancedLedger()
	l.Check(true)
	var buf bytes.Buffer
	if err := l.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, w := range []string{"fragments received", "duplicate", "suspect_id", "of source 12", "events built", "after event-counter resets", "event-counter resets of source 40 alone", "deferred stream", "store_error", "balanced"} {
		if !strings.Contains(out, w) {
			t.Errorf("table lacks %q:\n%s", w, out)
		}
	}
	// Names are left-aligned, so a part stays indented under its total
	// (a right-aligned column lost the indentation), values right-aligned
	// in one column.
	valueEnd := -1
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "in events ") && !strings.HasPrefix(line, "  in events ") {
			t.Errorf("the fragments in events are not indented under their total: %q", line)
		}
		if valueEnd < 0 {
			valueEnd = len(line)
		} else if len(line) != valueEnd {
			t.Errorf("values not right-aligned in one column: %q ends at %d, the first line at %d\n%s", line, len(line), valueEnd, out)
			break
		}
	}
	// The byte counts say what they count, next to the emulator's.
	l.InputBytes, l.BytesReceived = 4002580800, 3708367200
	l.Emulators = []emulator.Summary{{To: "shm://demo", FragmentsSent: 100, BytesSent: 4002580800}}
	buf.Reset()
	_ = l.WriteTable(&buf)
	for _, r := range [][2]string{
		{"input bytes (packets with headers)", "4002580800"},
		{"fragment payload bytes into the builder", "3708367200"},
		{"sent bytes (packets with headers)", "4002580800"},
	} {
		if !hasRow(buf.String(), r[0], r[1]) {
			t.Errorf("table lacks row %q %s:\n%s", r[0], r[1], buf.String())
		}
	}
	l.EventsBuilt++
	l.Check(true)
	buf.Reset()
	_ = l.WriteTable(&buf)
	if !strings.Contains(buf.String(), "NO") || !strings.Contains(buf.String(), "unbalanced: events: built 101") {
		t.Fatalf("unbalanced table:\n%s", buf.String())
	}
}

func TestRateMeter(t *testing.T) {
	var m rateMeter
	t0 := time.Unix(100, 0)
	// The inputs opened at t0 (counters 0); first read 2 s later.
	l := Ledger{FragmentsReceived: 200, EventsBuilt: 20, BytesReceived: 4000, EventsAccepted: 4}
	r := m.update(t0.Add(2*time.Second), t0, &l)
	if r.FragmentsPerSecond != 100 || r.EventsPerSecond != 10 || r.BytesPerSecond != 2000 || r.AcceptedPerSecond != 2 {
		t.Fatalf("rates = %+v", r)
	}
}
