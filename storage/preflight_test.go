package storage

import (
	"strings"
	"testing"
)

// TestPreflightMinFreeAboveDisk: a min_free_bytes larger than the file
// system could ever leave free is refused before the node starts (it used
// to start and refuse every write).
func TestPreflightMinFreeAboveDisk(t *testing.T) {
	for _, dir := range []string{t.TempDir(), t.TempDir() + "/not/yet"} {
		o := Options{Dir: dir, MinFreeBytes: 1 << 60}
		ps := o.Preflight()
		if len(ps) != 1 || !strings.Contains(ps.String(), "min_free_bytes: 1024PiB: want less than the size of the file system holding") {
			t.Fatalf("preflight of %s: %v", dir, ps)
		}
		if o.MinFreeBytes = 1 << 20; len(o.Preflight()) != 0 {
			t.Fatalf("preflight of %s with 1MiB free: %v", dir, o.Preflight())
		}
	}
}
