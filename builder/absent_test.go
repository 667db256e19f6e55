package builder

import (
	"slices"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/schemas"
)

// Sources declared absent are not waited for (a one-hour timeout here):
// events go out as soon as the others are in, incomplete; a source that
// has sent cannot be declared absent; an absent source that starts sending
// is waited for again.
func TestSetAbsent(t *testing.T) {
	h := newHarness(t, Config{Groups: threeSources, Timeout: time.Hour, BatchLatency: time.Millisecond}, true)
	for id := range uint64(5) {
		mustAdd(t, h.b, frag(1, id, "a", false, 0), nil)
		mustAdd(t, h.b, frag(2, id, "b", false, 0), nil)
	}
	if got := h.b.SetAbsent([]uint32{3, 2, 99}); !slices.Equal(got, []uint32{3}) {
		t.Fatalf("SetAbsent = %v, want [3] (2 has sent, 99 is no source)", got)
	}
	if got := h.b.Absent(); !slices.Equal(got, []uint32{3}) {
		t.Fatalf("Absent = %v", got)
	}
	rows := waitRows(t, h, 5) // the open ones, at once
	for id := uint64(5); id < 10; id++ {
		mustAdd(t, h.b, frag(1, id, "a", false, 0), nil)
		mustAdd(t, h.b, frag(2, id, "b", false, 0), nil)
	}
	rows = waitRows(t, h, 10) // new ones as soon as 1 and 2 are in
	for _, r := range rows {
		if r.status != schemas.StatusIncomplete || !slices.Equal(r.missing, []uint32{3}) {
			t.Fatalf("event %d: status %v, missing %v; want incomplete, missing [3]", r.id, r.status, r.missing)
		}
	}
	// Source 3 comes back: event 10 is complete, event 11 waits for it.
	mustAdd(t, h.b, frag(3, 10, "c", false, 0), nil)
	if got := h.b.Absent(); len(got) != 0 {
		t.Fatalf("Absent after source 3 sent = %v", got)
	}
	for _, src := range []uint32{1, 2} {
		mustAdd(t, h.b, frag(src, 10, "x", false, 0), nil)
		mustAdd(t, h.b, frag(src, 11, "x", false, 0), nil)
	}
	rows = waitRows(t, h, 11)
	if r := rows[10]; r.id != 10 || r.status != 0 {
		t.Fatalf("event 10: %+v, want complete", r)
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(h.snapshot()); n != 11 {
		t.Fatalf("%d events out: event 11 must wait for source 3 again", n)
	}
	rows = h.close()
	if len(rows) != 12 || rows[11].status != schemas.StatusIncomplete {
		t.Fatalf("after Close: %d events, last %+v", len(rows), rows[len(rows)-1])
	}
	checkBalanced(t, h.b.Ledger())
}
