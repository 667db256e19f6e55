package e2e

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStoreWhileRunning: `sluice store stat|ls|why|export` on the store of a
// running `sluice run` (which holds badger's directory lock) read it
// through the node's Arrow Flight endpoint, say so on stderr, and print
// what they print for the same events from the store itself once the node
// has stopped: the same ls lines, a byte-identical Arrow export of the
// events listed.
func TestStoreWhileRunning(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	p := start(t, "run", "--config", writeConfig(t, httpRunConfig, map[string]string{
		"SHM": shmName(t), "STORE": store, "ADDR": "127.0.0.1:0", "HTTP": "",
	}))
	addr := p.httpAddr(t)
	waitStored(t, p, addr, 100)
	if _, err := os.Stat(filepath.Join(store, "FLIGHT")); err != nil {
		t.Fatalf("the running node wrote no endpoint file: %v", err)
	}

	through := func(args ...string) (string, string) {
		t.Helper()
		q := start(t, args...)
		if code := q.wait(t, time.Minute); code != 0 {
			t.Fatalf("sluice %v on a running node's store: exit %d\n%s", args, code, q.log())
		}
		return q.stdout.String(), q.log()
	}
	statOut, statErr := through("store", "stat", "--path", store, "--json")
	if !strings.Contains(statErr, "is in use by a running node: reading it through its Arrow Flight endpoint grpc://127.0.0.1:") {
		t.Fatalf("store stat did not say it read through Flight:\n%s", statErr)
	}
	if !strings.Contains(statOut, `"stream": "deferred"`) {
		t.Fatalf("store stat through Flight:\n%s", statOut)
	}
	ls, _ := through("store", "ls", "--path", store, "--stream", "deferred", "--limit", "40")
	lines := strings.Split(strings.TrimSpace(ls), "\n")
	if len(lines) != 41 {
		t.Fatalf("store ls --limit 40 through Flight: %d lines\n%s", len(lines), ls)
	}
	last := strings.Fields(lines[40])[1] // the 40th event's id
	remote := filepath.Join(t.TempDir(), "remote.arrow")
	through("store", "export", "--path", store, "--stream", "deferred", "--events", "0-"+last, "--format", "arrow", "--out", remote)
	first := strings.Fields(lines[1])
	whyRemote, whyErr := through("store", "why", "--path", store, first[0], first[1], "--json")
	if !strings.Contains(whyErr, "through its Arrow Flight endpoint") || !strings.Contains(whyRemote, `"reason": "no-online-stage"`) {
		t.Fatalf("store why through Flight:\n%s\n%s", whyRemote, whyErr)
	}

	if code, body := post(t, "http://"+addr+"/run/stop", nil); code != http.StatusAccepted {
		t.Fatalf("POST /run/stop: %d %q", code, body)
	}
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d after POST /run/stop:\n%s", code, p.log())
	}
	if _, err := os.Stat(filepath.Join(store, "FLIGHT")); !os.IsNotExist(err) {
		t.Fatalf("the endpoint file outlived the node: %v", err)
	}
	q := start(t, "store", "ls", "--path", store, "--stream", "deferred", "--limit", "40")
	if code := q.wait(t, time.Minute); code != 0 || strings.Contains(q.log(), "Flight") {
		t.Fatalf("store ls after the run: exit %d\n%s", code, q.log())
	}
	if q.stdout.String() != ls {
		t.Fatalf("store ls through Flight differs from the store's own:\n%s\nwant\n%s", ls, q.stdout.String())
	}
	if got := runOK(t, "store", "why", "--path", store, first[0], first[1], "--json"); got != whyRemote {
		t.Fatalf("store why through Flight differs from the store's own:\n%s\nwant\n%s", whyRemote, got)
	}
	local := filepath.Join(t.TempDir(), "local.arrow")
	runOK(t, "store", "export", "--path", store, "--stream", "deferred", "--events", "0-"+last, "--format", "arrow", "--out", local)
	a, _ := os.ReadFile(remote)
	b, _ := os.ReadFile(local)
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatalf("Arrow export through Flight (%d bytes) differs from the store's own (%d bytes)", len(a), len(b))
	}
}
