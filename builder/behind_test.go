package builder

import (
	"slices"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/schemas"
)

// threeSources: two that run ahead (they also make the reference) and one
// that follows them.
var threeSources = []schemas.SourceGroup{{Name: "ahead", Sources: []uint32{1, 2}}, {Name: "late", Sources: []uint32{3}}}

// feedBehind adds events 0..n-1 of sources 1 and 2 at once, then those of
// source 3 one every step: source 3 ends n*step behind the others, far
// more than the timeout, but never silent for long.
func feedBehind(t *testing.T, b *Builder, n int, step time.Duration) {
	for id := range uint64(n) {
		mustAdd(t, b, frag(1, id, "a", false, 0), nil)
		mustAdd(t, b, frag(2, id, "b", false, 0), nil)
	}
	for id := range uint64(n) {
		time.Sleep(step)
		mustAdd(t, b, frag(3, id, "c", false, 0), nil)
	}
}

// A source that keeps sending but runs behind the others: its events wait
// for it past the timeout, and every one is complete.
func TestBehindSourceIsWaitedFor(t *testing.T) {
	const n = 100
	// 2 s behind at the end, a 1 s timeout: without waiting, half the
	// events would time out incomplete. (Source 3 would have to stall for
	// the whole timeout to be taken for silent.)
	h := newHarness(t, Config{Groups: threeSources, Timeout: time.Second, BehindWait: time.Hour, BatchLatency: time.Millisecond}, true)
	feedBehind(t, h.b, n, 20*time.Millisecond)
	rows := h.close()
	if len(rows) != n {
		t.Fatalf("%d events, want %d", len(rows), n)
	}
	for _, r := range rows {
		if r.status != 0 || r.nfrag != 3 {
			t.Fatalf("event %d: status %v, %d fragments, missing %v: want complete", r.id, r.status, r.nfrag, r.missing)
		}
	}
	l := h.b.Ledger()
	if l.EventsComplete != n || l.Discarded[ReasonLate] != 0 {
		t.Errorf("ledger: %d complete, %d late; want %d, 0", l.EventsComplete, l.Discarded[ReasonLate], n)
	}
	if l.EventsWaitedBehind == 0 || l.EventsWaitedBehind > n {
		t.Errorf("EventsWaitedBehind = %d, want 1..%d", l.EventsWaitedBehind, n)
	}
	checkBalanced(t, l)
}

// BehindWait < 0 keeps the plain timeout: the same feed times out most
// events and makes source 3's fragments late.
func TestBehindWaitOff(t *testing.T) {
	const n = 100
	h := newHarness(t, Config{Groups: threeSources, Timeout: time.Second, BehindWait: -1, BatchLatency: time.Millisecond}, true)
	feedBehind(t, h.b, n, 20*time.Millisecond)
	h.close()
	l := h.b.Ledger()
	if l.EventsIncomplete < n/4 || l.Discarded[ReasonLate] < n/4 || l.EventsWaitedBehind != 0 {
		t.Errorf("ledger: %d incomplete, %d late, %d waited; want >= %d, >= %d, 0",
			l.EventsIncomplete, l.Discarded[ReasonLate], l.EventsWaitedBehind, n/4, n/4)
	}
	checkBalanced(t, l)
}

// waitRows polls for n rows (the emitter's own timing, no Close).
func waitRows(t *testing.T, h *harness, n int) []row {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		rows := h.snapshot()
		if len(rows) >= n {
			return rows
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events out after 60 s, want %d: %+v", len(rows), n, rows)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A source that was behind and stops is taken for stopped once it was
// silent for BehindWait: the events waiting for it go out incomplete.
func TestBehindSourceThatStops(t *testing.T) {
	h := newHarness(t, Config{Groups: threeSources, Timeout: 100 * time.Millisecond, BehindWait: 200 * time.Millisecond, BatchLatency: time.Millisecond}, true)
	for id := range uint64(20) {
		mustAdd(t, h.b, frag(1, id, "a", false, 0), nil)
		mustAdd(t, h.b, frag(2, id, "b", false, 0), nil)
	}
	for id := range uint64(10) {
		mustAdd(t, h.b, frag(3, id, "c", false, 0), nil)
	}
	rows := waitRows(t, h, 20)
	for _, r := range rows {
		want := schemas.EventStatus(0)
		if r.id >= 10 {
			want = schemas.StatusIncomplete
		}
		if r.status != want {
			t.Errorf("event %d: status %v, want %v", r.id, r.status, want)
		}
		if r.id >= 10 && !slices.Equal(r.missing, []uint32{3}) {
			t.Errorf("event %d: missing %v, want [3]", r.id, r.missing)
		}
	}
	checkBalanced(t, h.b.Ledger())
}

// A source past an event that lacks its fragment lost it: the event goes
// out at its timeout, however long BehindWait; so does one waiting for a
// source that never sent at all.
func TestSourcePastOrSilentIsNotWaitedFor(t *testing.T) {
	h := newHarness(t, Config{Groups: threeSources, Timeout: 100 * time.Millisecond, BehindWait: time.Hour, BatchLatency: time.Millisecond}, true)
	for id := range uint64(10) {
		mustAdd(t, h.b, frag(1, id, "a", false, 0), nil)
		mustAdd(t, h.b, frag(2, id, "b", false, 0), nil)
		if id != 5 {
			mustAdd(t, h.b, frag(3, id, "c", false, 0), nil)
		}
	}
	rows := waitRows(t, h, 10)
	for _, r := range rows {
		if (r.id == 5) != (r.status == schemas.StatusIncomplete) {
			t.Errorf("event %d: status %v", r.id, r.status)
		}
	}
	// Source 3 silent from the start: never waited for.
	h2 := newHarness(t, Config{Groups: threeSources, Timeout: 100 * time.Millisecond, BehindWait: time.Hour, BatchLatency: time.Millisecond}, true)
	for id := range uint64(10) {
		mustAdd(t, h2.b, frag(1, id, "a", false, 0), nil)
		mustAdd(t, h2.b, frag(2, id, "b", false, 0), nil)
	}
	if rows := waitRows(t, h2, 10); rows[9].status != schemas.StatusIncomplete {
		t.Errorf("event 9: status %v, want incomplete", rows[9].status)
	}
	if l := h2.b.Ledger(); l.EventsWaitedBehind != 0 {
		t.Errorf("EventsWaitedBehind = %d for a source that never sent", l.EventsWaitedBehind)
	}
}
