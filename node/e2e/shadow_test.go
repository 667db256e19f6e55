package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// TestShadowStoreStream: a stage accepting every event with a shadow that
// accepts only every third event id (passthrough prescale=3, at the
// node's priority) and a shadow stream budget larger than the run. The
// run's ledger accounts for every event the stage decided (compared or
// skipped) and for every differing one (stored or not); `sluice store ls
// --stream shadow` lists exactly the stored ones, each an event the two
// decide apart, with the shadow's decision and production's in its reason,
// and export writes as many. How many the shadow compares depends on the
// machine (it may skip batches the node stored before it was done; at
// 100 events/s the run lasts 2.4 s, long enough for the shadow's plugin to
// start on a loaded machine), so the test checks the account, not a count.
func TestShadowStoreStream(t *testing.T) {
	const events = 240
	store := filepath.Join(t.TempDir(), "store")
	summary := filepath.Join(t.TempDir(), "run.json")
	cfg := writeConfig(t, `
run: 15
inputs:
  - uri: shm://{{SHM}}
    emulator: {events: 240, rate: 100, sources: "0-2", ring_size: 4MiB}
sources:
  - {name: tracker, sources: "0-2"}
builder: {batch_events: 16, timeout: 100ms}
trigger:
  stages:
    - name: hlt1
      plugin: {{BIN}}/plugins/passthrough
      shadow: {plugin: {{BIN}}/plugins/passthrough, params: {prescale: "3"}, queue: 32, nice: 0, idle: false, store_bytes: 64MiB}
store: {path: {{STORE}}, min_free_bytes: 256MiB}
log: {format: json}
`, map[string]string{"SHM": shmName(t), "BIN": bin, "STORE": store})
	runOK(t, "run", "--config", cfg, "--summary-json", summary)
	l := readLedger(t, summary)
	if !l.Balanced || len(l.Stages) != 1 || l.Stages[0].Shadow == nil || l.Stages[0].Seen != events {
		t.Fatalf("ledger: %+v", l)
	}
	sh := l.Stages[0].Shadow
	var skipped, unstored uint64
	for _, n := range sh.Skipped {
		skipped += n
	}
	for _, n := range sh.Unstored {
		unstored += n
	}
	if sh.Compared+skipped != events || sh.Agreeing+sh.Differing != sh.Compared || unstored != 0 || sh.Stored != sh.Differing {
		t.Fatalf("shadow ledger %+v: want compared + skipped = %d, agreeing + differing = compared, every differing event stored", sh, events)
	}
	t.Logf("shadow: compared %d, differing %d stored, skipped %v", sh.Compared, sh.Differing, sh.Skipped)

	lines := strings.Split(strings.TrimSpace(runOK(t, "store", "ls", "--path", store, "--stream", "shadow")), "\n")
	if len(lines) < 1 || !strings.HasPrefix(lines[0], "run") {
		t.Fatalf("store ls --stream shadow: %q", lines)
	}
	var listed uint64
	rows := lines[1:]
	if sh.Stored == 0 {
		// Nothing differing was stored (the shadow skipped every batch, e.g.
		// its plugin started after the run's last batch was released): ls
		// says so in one line instead of listing rows.
		if len(rows) != 1 || !strings.HasPrefix(rows[0], "no events in the shadow stream") {
			t.Fatalf("store ls --stream shadow with nothing stored: %q", lines)
		}
		rows = nil
	}
	for _, line := range rows {
		f := strings.Fields(line)
		// run event_id timestamp status fragments decision lines stage reason… bytes
		if len(f) < 9 {
			t.Fatalf("store ls line %q", line)
		}
		id, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil || id%3 == 0 || f[0] != "15" || f[5] != "reject" || f[7] != "hlt1/shadow" || !strings.Contains(line, "production: accept (all)") {
			t.Fatalf("shadow stream event %q: want run 15, an id the two decide apart (not a multiple of 3), reject by hlt1/shadow, production's accept in the reason", line)
		}
		listed++
	}
	if listed != sh.Stored {
		t.Fatalf("store ls --stream shadow lists %d events, the ledger says %d stored", listed, sh.Stored)
	}
	out := filepath.Join(t.TempDir(), "shadow.arrow")
	runOK(t, "store", "export", "--path", store, "--stream", "shadow", "--format", "arrow", "--out", out)
	if n := readArrowTable(t, out).NumRows(); uint64(n) != listed {
		t.Fatalf("export --stream shadow wrote %d events, ls listed %d", n, listed)
	}
}

// readArrowTable reads a whole Arrow IPC file (an export) into a table,
// released at the end of the test.
func readArrowTable(t *testing.T, path string) arrow.Table {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ipc.NewFileReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var recs []arrow.RecordBatch
	for i := range r.NumRecords() {
		rec, err := r.RecordBatchAt(i)
		if err != nil {
			t.Fatal(err)
		}
		defer rec.Release()
		recs = append(recs, rec)
	}
	tbl := array.NewTableFromRecords(r.Schema(), recs)
	t.Cleanup(tbl.Release)
	return tbl
}
