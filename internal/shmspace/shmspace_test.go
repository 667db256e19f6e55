package shmspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// smallTmpfs mounts a tmpfs of size bytes for the test (root only).
func smallTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, 0) })
	return dir
}

func TestReserveRefusesWhatDoesNotFit(t *testing.T) {
	dir := smallTmpfs(t, "1m")
	f, err := os.Create(filepath.Join(dir, "ring"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = Reserve(f, 2<<20)
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "not enough shared memory: 2MiB needed; "+dir+" has 1MiB free of 1MiB") {
		t.Fatalf("Reserve 2MiB on a 1MiB tmpfs: %v", err)
	}
	// Nothing kept from the failed attempt: what fits still fits.
	if err := Reserve(f, 512<<10); err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	if free, _, _ := Free(dir); st.Size() != 512<<10 || free != 512<<10 {
		t.Fatalf("after reserving 512KiB: size %d, %d free", st.Size(), free)
	}
}

func TestBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0B", 512: "512B", 64 << 20: "64MiB", 3 << 29: "1.5GiB", 1000: "1000B", 1 << 40: "1TiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
