package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenOfAStoreInUse: a second Open of a store another opener holds is
// refused with ErrLocked before it changes any file. It once removed the
// empty log file the holder had just created (the cleanup of a killed
// writer's leftovers runs before badger's own lock), and the holder's
// open failed. A reader is refused too, and the store opens again once
// the holder closes it.
func TestOpenOfAStoreInUse(t *testing.T) {
	dir := t.TempDir()
	holder, err := Open(testOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	// What the holder's badger does while it opens: a new, still empty log.
	fresh := filepath.Join(dir, "000099.vlog")
	if err := os.WriteFile(fresh, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(testOptions(dir))
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("is locked by pid %d", os.Getpid())) {
		t.Fatalf("second writer: %v, want ErrLocked naming the holder's pid", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("the refused open touched the holder's files: %v", err)
	}
	ro := testOptions(dir)
	ro.ReadOnly = true
	if _, err := Open(ro); !errors.Is(err, ErrLocked) {
		t.Fatalf("reader beside a writer: %v, want ErrLocked", err)
	}
	if err := os.Remove(fresh); err != nil {
		t.Fatal(err)
	}
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Open(ro)
	if err != nil {
		t.Fatalf("reader after the writer closed: %v", err)
	}
	// Readers share the lock; a writer waits for them to close.
	r2, err := Open(ro)
	if err != nil {
		t.Fatalf("second reader: %v", err)
	}
	// Readers name no pid (the writer emptied the file at its close).
	if _, err := Open(testOptions(dir)); !errors.Is(err, ErrLocked) || strings.Contains(err.Error(), "by pid") {
		t.Fatalf("writer beside readers: %v, want ErrLocked naming no pid", err)
	}
	r.Close()
	r2.Close()
	w, err := Open(testOptions(dir))
	if err != nil {
		t.Fatalf("writer after the readers closed: %v", err)
	}
	w.Close()
}
