package shm

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestReclaimStaleOnlyWhenOwnersDead: a ring whose writer (another,
// live process) is alive is refused naming its pid and left in place; once
// that process has exited the ring is reclaimed, with its path, bytes and
// pid.
// So is a temporary file a killed writer left while creating the ring.
func TestReclaimStaleOnlyWhenOwnersDead(t *testing.T) {
	name := ringName(t)
	w, err := CreateWriter(name, WriterConfig{DataSize: MinRingData})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Skip("cannot start sleep:", err)
	}
	defer other.Process.Kill()
	pid := uint32(other.Process.Pid)
	w.m.u32(offWriterPID).Store(pid) // as if that process wrote it

	if own, err := RingOwner(filepath.Join(Dir, name)); err != nil || own.WriterPID != pid || !own.WriterAlive || own.Bytes < MinRingData {
		t.Fatalf("RingOwner: %+v, %v", own, err)
	}
	_, err = ReclaimStale(name)
	if !errors.Is(err, ErrRingInUse) || !strings.Contains(err.Error(), "its writer pid "+strconv.Itoa(int(pid))+" is alive") {
		t.Fatalf("ReclaimStale of a live writer's ring: %v", err)
	}
	if _, err := os.Stat(filepath.Join(Dir, name)); err != nil {
		t.Fatalf("a live writer's ring was touched: %v", err)
	}
	// A temporary file of the same name, as a writer killed mid-creation
	// leaves it: its pid is dead.
	tmp := filepath.Join(Dir, "."+name+".tmp123")
	page := make([]byte, controlSize)
	copy(page[offWriterPID:], []byte{0xff, 0xff, 0xff, 0x7f}) // no such pid
	if err := os.WriteFile(tmp, page, 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(tmp)

	other.Process.Kill()
	other.Wait()
	r, err := ReclaimStale(name)
	if err != nil || len(r.Files) != 2 || r.Pids[0] != pid || r.Bytes < MinRingData {
		t.Fatalf("ReclaimStale after its writer exited: %+v, %v", r, err)
	}
	// Each file removed names its path, its dead writer and its bytes,
	// for the node's log record of it.
	f := r.Files[0]
	if f.Path != filepath.Join(Dir, name) || f.WriterPID != pid || f.Bytes < MinRingData || r.Files[1].Path != tmp || r.Files[1].WriterPID != 0x7fffffff {
		t.Fatalf("ReclaimStale's files: %+v", r.Files)
	}
	for _, p := range []string{filepath.Join(Dir, name), tmp} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s not reclaimed: %v", p, err)
		}
	}
	if r, err := ReclaimStale(name); err != nil || len(r.Files) != 0 {
		t.Fatalf("nothing left to reclaim: %+v, %v", r, err)
	}
}
