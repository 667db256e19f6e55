package storage

import (
	"errors"
	"slices"
	"testing"

	"github.com/sluice-daq/sluice/schemas"
)

// TestShadowStream: the shadow stream holds copies of events beside the
// accepted and deferred streams: its own keys (listed, read back, counted
// by Stats only once it has events, named by ParseStream), and no
// provenance record of its own, so Why still describes the production
// event, and an event only in the shadow stream has none.
func TestShadowStream(t *testing.T) {
	s := openTest(t, nil)
	evs := genEvents(7, 100, 4, 1, 256)
	gec := &schemas.PluginID{Stage: "hlt1", Name: "gec", Version: "1.0.0", Digest: "aa"}
	for i := range evs {
		evs[i].meta = schemas.Verdict{Decision: schemas.DecisionAccept, Lines: 1, Stage: "hlt1", Plugin: gec}
	}
	put(t, s, Accepted, evs[:3])
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	for _, ss := range st.Streams {
		if ss.Stream == Shadow {
			t.Fatal("Stats lists an empty shadow stream")
		}
	}
	// The shadow rejected 101 and 103 (103 it saw, production's outcome
	// for it is elsewhere).
	shadowID := &schemas.PluginID{Stage: "hlt1/shadow", Name: "gec", Version: "2.0.0", Digest: "bb"}
	diff := []testEvent{evs[1], evs[3]}
	for i := range diff {
		diff[i].meta = schemas.Verdict{Decision: schemas.DecisionReject, Stage: "hlt1/shadow", Plugin: shadowID,
			Reason: schemas.Reason{Text: "production: accept (all)"}}
	}
	if ack := put(t, s, Shadow, diff); ack.Events != 2 || ack.Replaced != 0 {
		t.Fatalf("shadow put: %+v, want 2 events, none replaced", ack)
	}
	keys, metas := readAll(t, s, Shadow, CursorOptions{})
	if want := []Key{{7, 101}, {7, 103}}; !slices.Equal(keys, want) {
		t.Fatalf("shadow stream keys %v, want %v", keys, want)
	}
	for i, m := range metas {
		if m.Decision != schemas.DecisionReject || m.Stage != "hlt1/shadow" || m.Reason.Text != "production: accept (all)" {
			t.Fatalf("shadow event %v: %+v", keys[i], m)
		}
	}
	if keys, _ := readAll(t, s, Accepted, CursorOptions{}); len(keys) != 3 {
		t.Fatalf("accepted stream has %d events after the shadow put, want 3", len(keys))
	}
	st, err = s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	var got []Stream
	for _, ss := range st.Streams {
		got = append(got, ss.Stream)
		if ss.Stream == Shadow && ss.Events != 2 {
			t.Fatalf("Stats: shadow stream of %d events, want 2", ss.Events)
		}
	}
	if want := []Stream{Accepted, Deferred, Shadow}; !slices.Equal(got, want) {
		t.Fatalf("Stats streams %v, want %v", got, want)
	}
	if p, err := ParseStream("shadow"); err != nil || p != Shadow || p.String() != "shadow" {
		t.Fatalf("ParseStream(shadow) = %v, %v", p, err)
	}
	w, err := s.Why(7, 101)
	if err != nil {
		t.Fatal(err)
	}
	if w.Stream != "accepted" || w.Decision != "accept" || len(w.Passes) != 1 || len(w.Passes[0].Steps) != 1 || w.Passes[0].Steps[0].Plugin != "gec" || w.Passes[0].Steps[0].Version != "1.0.0" {
		t.Fatalf("why 101 after the shadow put: %+v (the production event's provenance was replaced?)", w)
	}
	if _, err := s.Why(7, 103); !errors.Is(err, ErrNoEvent) {
		t.Fatalf("why of an event only in the shadow stream: %v, want ErrNoEvent", err)
	}
}
