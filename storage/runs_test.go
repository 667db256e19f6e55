package storage

import (
	"testing"
	"time"
)

// A run's end record survives reopening, names only that run, and is seen
// by a read-only open; the streams' counts do not see it.
func TestRunEnded(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(testOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, Accepted, genEvents(7, 0, 3, 1, 100))
	if _, ok, err := s.RunEnded(7); ok || err != nil {
		t.Fatalf("run 7 ended before EndRun: %v %v", ok, err)
	}
	end := time.Unix(1700000000, 123)
	if err := s.EndRun(7, end); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	o := testOptions(dir)
	o.ReadOnly = true
	r, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	at, ok, err := r.RunEnded(7)
	if !ok || err != nil || !at.Equal(end) {
		t.Fatalf("run 7: ended %v at %v (%v), want %v", ok, at, err, end)
	}
	if _, ok, _ := r.RunEnded(8); ok {
		t.Fatal("run 8 ended although only run 7 did")
	}
	if n, err := r.Count(Accepted, Selection{}); n != 3 || err != nil {
		t.Fatalf("accepted count %d (%v), want 3", n, err)
	}
	st, err := r.Stats()
	if err != nil {
		t.Fatal(err)
	}
	for _, ss := range st.Streams {
		if ss.Stream == Accepted && ss.Events != 3 {
			t.Fatalf("stats %+v", ss)
		}
	}
}
