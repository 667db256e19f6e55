package builder

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/schemas"
)

// sixteen is one group of sources 0..15.
func sixteen() []schemas.SourceGroup {
	g := schemas.SourceGroup{Name: "all"}
	for s := range uint32(16) {
		g.Sources = append(g.Sources, s)
	}
	return []schemas.SourceGroup{g}
}

// sendEvents sends events first..first+n-1 from every source of groups,
// event by event.
func sendEvents(t *testing.T, b *Builder, groups []schemas.SourceGroup, first, n uint64) {
	t.Helper()
	for id := first; id < first+n; id++ {
		for _, g := range groups {
			for _, s := range g.Sources {
				mustAdd(t, b, frag(s, id, fmt.Sprint(s, "/", id), false, 0), nil)
			}
		}
	}
}

func flush(t *testing.T, b *Builder) {
	t.Helper()
	if err := b.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// One source's far-ahead event id, sent first and built (flushed, as its
// timeout would) before anyone else sends: the next 1000 events of all 16
// sources must build complete, not be discarded as late.
func TestFarAheadIDSentFirst(t *testing.T) {
	for _, bad := range []uint64{5000, 1 << 63, math.MaxUint64} {
		t.Run(fmt.Sprint(bad), func(t *testing.T) {
			h := newHarness(t, Config{Groups: sixteen(), Timeout: time.Hour, BatchLatency: time.Millisecond}, true)
			mustAdd(t, h.b, frag(3, bad, "bad", false, 0), nil)
			flush(t, h.b)
			sendEvents(t, h.b, sixteen(), 0, 1000)
			h.close()
			l := h.b.Ledger()
			checkBalanced(t, l)
			if l.EventsComplete != 1000 || l.Discarded[ReasonLate] != 0 {
				t.Fatalf("%d events complete (want 1000), %d fragments late (want 0): %+v", l.EventsComplete, l.Discarded[ReasonLate], l)
			}
		})
	}
}

// Every source's event counter resets (CMS resync): after 70 000 events
// (more than LateWindow), all four sources start again at 0. The events
// after the reset must build complete.
func TestCounterResetAllSources(t *testing.T) {
	groups := []schemas.SourceGroup{{Name: "all", Sources: []uint32{0, 1, 2, 3}}}
	h := newHarness(t, Config{Groups: groups, Timeout: time.Hour, BatchLatency: time.Millisecond}, true)
	sendEvents(t, h.b, groups, 0, 70000)
	sendEvents(t, h.b, groups, 0, 1000)
	h.close()
	l := h.b.Ledger()
	checkBalanced(t, l)
	if l.EventsComplete != 71000 || l.Discarded[ReasonLate] != 0 {
		t.Fatalf("%d events complete (want 71000), %d fragments late (want 0): %+v", l.EventsComplete, l.Discarded[ReasonLate], l)
	}
}
