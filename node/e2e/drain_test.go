package e2e

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const fullStoreConfig = `
node: {drain_timeout: 2s}
inputs:
  - uri: shm://{{SHM}}
    emulator: {duration: 5m, rate: 400, packing: 4, fragment_size: {mean: 64KiB}, ring_size: 16MiB}
sources:
  - {name: tracker, sources: "0-3"}
builder: {timeout: 1s}
store: {path: {{STORE}}, min_free_bytes: 256MiB, max_bytes: 64MiB}
http: {address: "127.0.0.1:0"}
log: {format: json}
`

// TestDrainWithFullStore: SIGTERM while the store refuses writes (its
// max_bytes reached) drains within node.drain_timeout instead of hanging:
// the events still held are counted not_stored_at_drain with their ids in
// the summary, the ledger balances and the exit status is non-zero.
func TestDrainWithFullStore(t *testing.T) {
	summary := filepath.Join(t.TempDir(), "run.json")
	cfg := writeConfig(t, fullStoreConfig, map[string]string{"SHM": shmName(t), "STORE": filepath.Join(t.TempDir(), "store")})
	p := start(t, "run", "--config", cfg, "--summary-json", summary)
	addr := p.httpAddr(t)
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(p.log(), "store refuses writes: disk budget reached") {
		if time.Now().After(deadline) {
			t.Fatalf("the store never filled:\n%s", p.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	s, err := getStatus(t, addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code == 0 || !strings.Contains(p.log(), "not_stored_at_drain") {
		t.Fatalf("drain with a full store: exit %d, want non-zero naming not_stored_at_drain\n%s", code, p.log())
	}
	l := readLedger(t, summary)
	lost := l.EventsDropped["not_stored_at_drain"]
	if !l.Balanced || lost == 0 || uint64(len(l.NotStoredAtDrain)) != lost || l.EventsStored < s.Ledger.EventsStored ||
		l.EventsStored+lost != l.EventsAccepted+l.EventsDeferred {
		t.Fatalf("ledger after a drain with a full store: %+v", l)
	}
}

const hugeEventConfig = `
node: {id: e2e, memory_budget: 1GiB, memory_split: {store: 64MiB}}
inputs:
  - uri: shm://{{SHM}}
    emulator: {events: 6, packing: 4, fragment_size: {mean: 1MiB, min: 1MiB, max: 1MiB}, ring_size: 128MiB}
sources:
  - {name: tracker, sources: "0-23"}
builder: {timeout: 10s, batch_events: 2{{MAX}}}
store: {path: {{STORE}}, min_free_bytes: 256MiB}
http: {address: "127.0.0.1:0"}
log: {format: json}
`

// TestEventTooLargeForStore: events of 24 MiB, above what a store with a
// 64 MiB memory share takes (a value-log file of 16 MiB), are
// counted events_dropped too_large_for_store, logged with their ids,
// and the run goes on to its end with a balanced ledger (the store's
// error used to abort it, with a hex dump of the event).
func TestEventTooLargeForStore(t *testing.T) {
	summary := filepath.Join(t.TempDir(), "run.json")
	cfg := writeConfig(t, hugeEventConfig, map[string]string{"SHM": shmName(t), "STORE": filepath.Join(t.TempDir(), "store"), "MAX": ""})
	p := start(t, "run", "--config", cfg, "--summary-json", summary)
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.log())
	}
	l := readLedger(t, summary)
	if !l.Balanced || l.EventsBuilt != 6 || l.EventsDropped["too_large_for_store"] != 6 || l.EventsStored != 0 {
		t.Fatalf("ledger %+v", l)
	}
	if n := strings.Count(p.log(), `"msg":"events too large for the store: not stored","node":"e2e","run":0,"reason":"too_large_for_store","stream":"deferred","event_ids":[`); n != 3 {
		t.Fatalf("%d writes logged with events too large, want 3 (of 2 events each)\n%s", n, p.log())
	}
}

// TestMaxEventBytes: `config validate` refuses a builder.max_event_bytes
// the store cannot take with its memory share, naming the share that
// would (exit 3); within it, events larger are dropped before the store,
// counted event_too_large with their ids, and the run goes on balanced.
func TestMaxEventBytes(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	tooBig := writeConfig(t, hugeEventConfig, map[string]string{"SHM": shmName(t), "STORE": store, "MAX": ", max_event_bytes: 24MiB"})
	v := start(t, "config", "validate", tooBig)
	if code := v.wait(t, time.Minute); code != 3 || !strings.Contains(v.stdout.String(), "builder.max_event_bytes: 24MiB: want at most the largest event the store takes") ||
		!strings.Contains(v.stdout.String(), "give node.memory_split.store at least 97MiB") {
		t.Fatalf("config validate of a 24MiB max_event_bytes with a 64MiB store share: exit %d\n%s%s", code, v.stdout.String(), v.log())
	}
	summary := filepath.Join(t.TempDir(), "run.json")
	cfg := writeConfig(t, hugeEventConfig, map[string]string{"SHM": shmName(t), "STORE": store, "MAX": ", max_event_bytes: 8MiB"})
	p := start(t, "run", "--config", cfg, "--summary-json", summary)
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.log())
	}
	l := readLedger(t, summary)
	if !l.Balanced || l.EventsBuilt != 6 || l.EventsDropped["event_too_large"] != 6 || l.EventsDropped["too_large_for_store"] != 0 || l.EventsStored != 0 {
		t.Fatalf("ledger %+v", l)
	}
	if n := strings.Count(p.log(), `"msg":"events larger than builder.max_event_bytes: not stored","node":"e2e","run":0,"reason":"event_too_large","stream":"deferred","event_ids":[`); n != 3 {
		t.Fatalf("%d writes logged with events too large, want 3 (of 2 events each)\n%s", n, p.log())
	}
}
