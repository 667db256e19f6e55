package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/storage"
)

// TestProvenanceWhy: a run whose readout never sends source 3 (the node
// expects 0-3), a stage that defers half the events, then `sluice replay`:
// `sluice store why` says for an event accepted online that source 3 is
// missing and which plugin (its binary's sha256) accepted it, and for a
// deferred-then-replayed event both passes, the online deferral by the
// fraction and the replay stage's acceptance.
func TestProvenanceWhy(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	cfg := writeConfig(t, `
run: 77
inputs:
  - uri: shm://{{SHM}}
    emulator: {events: 120, rate: 2000, sources: "0-2", ring_size: 4MiB}
sources:
  - {name: tracker, sources: "0-3"}
builder: {batch_events: 16, timeout: 100ms}
trigger:
  stages:
    - {name: hlt1, plugin: {{BIN}}/plugins/passthrough, deferral: {fraction: 0.5}}
    - {name: hlt2, plugin: {{BIN}}/plugins/passthrough, when: replay}
store: {path: {{STORE}}, min_free_bytes: 256MiB}
log: {format: json}
`, map[string]string{"SHM": shmName(t), "BIN": bin, "STORE": store})
	runOK(t, "run", "--config", cfg)
	runOK(t, "replay", "--config", cfg)

	digest := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(b)
		return hex.EncodeToString(h[:])
	}(filepath.Join(bin, "plugins", "passthrough"))

	// One event accepted online, one accepted by the replay.
	var online, replayed string
	for _, line := range strings.Split(runOK(t, "store", "ls", "--path", store, "--stream", "accepted"), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		if strings.Contains(f[3], "replayed") {
			replayed = f[1]
		} else {
			online = f[1]
		}
	}
	if online == "" || replayed == "" {
		t.Fatalf("want events accepted online and by replay; online %q replayed %q", online, replayed)
	}
	why := func(id string) storage.Why {
		t.Helper()
		var w storage.Why
		out := runOK(t, "store", "why", "--path", store, "77", id, "--json")
		if err := json.Unmarshal([]byte(out), &w); err != nil {
			t.Fatalf("store why --json: %v\n%s", err, out)
		}
		return w
	}
	wantSources := storage.WhySources{Expected: 4, Contributed: 3, Missing: []uint32{3}, Corrupt: []uint32{}, Duplicated: []uint32{}, Late: []uint32{}}
	w := why(online)
	if !reflect.DeepEqual(w.Sources, wantSources) || w.Status[0] != "incomplete" || len(w.Passes) != 1 || len(w.Passes[0].Steps) != 1 {
		t.Fatalf("why %s (accepted online): %+v", online, w)
	}
	st := w.Passes[0].Steps[0]
	if st.Stage != "hlt1" || st.Plugin != "passthrough" || st.SHA256 != digest || st.Decision != "accept" || !reflect.DeepEqual(st.Kept, []string{"all"}) || w.Passes[0].Replay {
		t.Fatalf("why %s online step %+v, want hlt1's passthrough (sha256 %s) accepting", online, st, digest)
	}
	w = why(replayed)
	if !reflect.DeepEqual(w.Sources, wantSources) || len(w.Passes) != 2 {
		t.Fatalf("why %s (replayed): %+v", replayed, w)
	}
	on, re := w.Passes[0], w.Passes[1]
	if on.Replay || len(on.Steps) != 1 || on.Steps[0].Stage != "hlt1" || on.Steps[0].Decision != "defer" || on.Steps[0].Reason != "fraction" {
		t.Fatalf("why %s online pass %+v, want hlt1 deferring by the fraction", replayed, on)
	}
	if !re.Replay || len(re.Steps) != 1 || re.Steps[0].Stage != "hlt2" || re.Steps[0].SHA256 != digest || re.Steps[0].Decision != "accept" || !re.At.After(on.At) {
		t.Fatalf("why %s replay pass %+v, want hlt2 accepting after the online pass (%v)", replayed, re, on.At)
	}
	text := runOK(t, "store", "why", "--path", store, "77", replayed)
	for _, want := range []string{"sources: 3 of 4 contributed; missing 3;", "pass 0 (online)", "pass 1 (replay)", digest, "fraction"} {
		if !strings.Contains(text, want) {
			t.Fatalf("store why %s: no %q in\n%s", replayed, want, text)
		}
	}
}

// TestProvenanceDuplicatedAndCorrupt: a crafted readout file (sources
// 0-2, events 1-8 in packets of 4) in which source 1 sends its packet of
// events 1-4 twice and source 2's fragment of event 6 fails its CRC:
// `sluice store why --json` names source 1 as duplicated for events 1-4
// and source 2 as corrupt for event 6, and nothing for the others; the
// text output says the same.
func TestProvenanceDuplicatedAndCorrupt(t *testing.T) {
	dir := t.TempDir()
	var file []byte
	packet := func(src uint32, first uint64, corrupt int) []byte {
		var pay [][]byte
		var crcs []uint32
		for i := range 4 {
			p := []byte(fmt.Sprintf("source %d event %d", src, first+uint64(i)))
			pay, crcs = append(pay, p), append(crcs, schemas.Checksum(p))
			if i == corrupt {
				crcs[i] ^= 0x5a5a
			}
		}
		return schemas.AppendMFP(nil, src, first, 0, 0, pay, crcs)
	}
	for _, first := range []uint64{1, 5} {
		for src := uint32(0); src < 3; src++ {
			corrupt := -1
			if src == 2 && first == 5 {
				corrupt = 1 // event 6
			}
			p := packet(src, first, corrupt)
			file = append(file, p...)
			if src == 1 && first == 1 {
				file = append(file, p...) // sent twice
			}
		}
	}
	input := filepath.Join(dir, "readout.mfp")
	if err := os.WriteFile(input, file, 0o644); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "store")
	cfg := writeConfig(t, `
run: 78
inputs:
  - uri: file://{{FILE}}
sources:
  - {name: tracker, sources: "0-2"}
builder: {batch_events: 16, timeout: 200ms}
trigger:
  stages:
    - {name: hlt1, plugin: {{BIN}}/plugins/passthrough}
store: {path: {{STORE}}, min_free_bytes: 256MiB}
log: {format: json}
`, map[string]string{"FILE": input, "BIN": bin, "STORE": store})
	runOK(t, "run", "--config", cfg)
	for id := 1; id <= 8; id++ {
		var w storage.Why
		out := runOK(t, "store", "why", "--path", store, "78", fmt.Sprint(id), "--json")
		if err := json.Unmarshal([]byte(out), &w); err != nil {
			t.Fatalf("store why --json: %v\n%s", err, out)
		}
		want := storage.WhySources{Expected: 3, Contributed: 3, Missing: []uint32{}, Corrupt: []uint32{}, Duplicated: []uint32{}, Late: []uint32{}}
		var status []string
		switch {
		case id <= 4:
			want.Duplicated, want.Duplicates, status = []uint32{1}, true, []string{"duplicates"}
		case id == 6:
			want.Corrupt, status = []uint32{2}, []string{"corrupt"}
		}
		if !reflect.DeepEqual(w.Sources, want) || !reflect.DeepEqual(w.Status, append([]string{}, status...)) || w.Stream != "accepted" {
			t.Errorf("why 78 %d: %s stream, status %v, sources %+v\nwant status %v, sources %+v", id, w.Stream, w.Status, w.Sources, status, want)
		}
	}
	text := runOK(t, "store", "why", "--path", store, "78", "2")
	if want := "sources: 3 of 3 contributed; missing -; corrupt -; duplicated 1; late -;"; !strings.Contains(text, want) {
		t.Errorf("store why 78 2: no %q in\n%s", want, text)
	}
}
