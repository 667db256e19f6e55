package wire

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// TestStaleRegions: a region whose host pid has exited is listed and
// removed with that pid, its path and its bytes (what the node's log
// record of it names); a live host's region is neither.
func TestStaleRegions(t *testing.T) {
	dir := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip("cannot run true:", err)
	}
	pid := dead.Process.Pid
	stale := filepath.Join(dir, RegionPrefix+strconv.Itoa(pid)+"-1")
	live := filepath.Join(dir, RegionPrefix+strconv.Itoa(os.Getpid())+"-2")
	for _, p := range []string{stale, live} {
		if err := os.WriteFile(p, make([]byte, 8192), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got := RemoveStaleRegions(dir)
	if len(got) != 1 || got[0].Path != stale || got[0].PID != pid || got[0].Bytes < 8192 {
		t.Fatalf("RemoveStaleRegions = %+v, want %s of pid %d, >= 8192 bytes", got, stale, pid)
	}
	left, _ := filepath.Glob(filepath.Join(dir, RegionPrefix+"*"))
	if !slices.Equal(left, []string{live}) {
		t.Fatalf("left %v, want only the live host's %s", left, live)
	}
}
