package storage

import "testing"

// TestMemoryForEvent: the share MemoryForEvent names takes the event, and
// a MiB less does not; an event over 256 MiB, or over a fixed value-log
// size, has none. Options.MaxEventBytes is what an opened store reports.
func TestMemoryForEvent(t *testing.T) {
	o := DefaultOptions()
	for _, n := range []int64{1, 4 << 20, 24<<20 + 4096, 100 << 20, 256 << 20} {
		m := o.MemoryForEvent(n)
		if m == 0 || o.WithMemory(m).MaxEventBytes() < n {
			t.Fatalf("%d-byte event: share %d takes %d", n, m, o.WithMemory(m).MaxEventBytes())
		}
		if m > MinMemoryBytes && o.WithMemory(m-1<<20).MaxEventBytes() >= n {
			t.Errorf("%d-byte event: share %d, but %d MiB less takes it too", n, m, 1)
		}
	}
	if m := o.MemoryForEvent(256<<20 + 1); m != 0 {
		t.Errorf("an event over 256 MiB: share %d, want none", m)
	}
	fixed := o
	fixed.ValueLogFileSize = 8 << 20
	if m := fixed.MemoryForEvent(9 << 20); m != 0 {
		t.Errorf("an event over a fixed 8 MiB value-log file: share %d, want none", m)
	}
	s, err := Open(Options{Dir: t.TempDir(), MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, want := s.MaxEventBytes(), (Options{MemoryBytes: 64 << 20}).MaxEventBytes(); got != want {
		t.Errorf("open store takes %d, Options.MaxEventBytes %d", got, want)
	}
}
