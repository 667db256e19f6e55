package storage

import (
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
