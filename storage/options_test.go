package storage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOptionsValidate: the defaults are valid; each mistake is reported
// with its path in the store section.
func TestOptionsValidate(t *testing.T) {
	if ps := DefaultOptions().Validate(); len(ps) != 0 {
		t.Fatalf("defaults invalid: %v", ps)
	}
	o := DefaultOptions()
	o.Dir, o.Sync, o.GCInterval, o.MaxStoreBytes = "", "batch", 0, 1<<20
	want := `path: want a directory for the event store, e.g. ./data
sync: "batch": want every-batch, interval or never
gc_interval: 0s: want a positive duration such as 5m
max_bytes: 1MiB: want 0 (no limit) or at least 64MiB`
	if got := strings.ReplaceAll(o.Validate().String(), "; ", "\n"); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	o = DefaultOptions()
	o.Sync, o.SyncInterval = SyncInterval, -time.Second
	if got := o.Validate().String(); got != "sync_interval: -1s: want a positive duration with sync: interval" {
		t.Errorf("got %s", got)
	}
}

// TestOpenRefusesUnknownSync: a policy not among the three is an error,
// not a silent choice of one.
func TestOpenRefusesUnknownSync(t *testing.T) {
	_, err := Open(Options{Dir: t.TempDir(), Sync: "always"})
	if err == nil || !strings.Contains(err.Error(), `sync policy "always"`) {
		t.Fatalf("got %v", err)
	}
}

// Preflight refuses a store path the node could not create or write (under
// /proc, under a file), and leaves nothing behind where it can.
func TestPreflightStorePath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dir, want string
	}{
		{"/proc/sluice-store", "want a path that can be created: cannot write in /proc"},
		{"/proc/self/sluice/store", "want a path that can be created: cannot write in /proc/self"},
		{file, "want a directory, found a file"},
		{filepath.Join(file, "store"), "want a path that can be created: " + file + " is a file"},
		{filepath.Join(dir, "new", "store"), ""},
		{dir, ""},
	} {
		got := Options{Dir: c.dir}.Preflight().String()
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.dir, got, c.want)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Errorf("preflight left %v in %s", left, dir)
	}
}
