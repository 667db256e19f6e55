package builder

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
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

// A far-ahead (or far-behind) id from one source in the middle of a run is
// held as a suspect event and, never confirmed by the others, discarded as
// suspect_id for that source; every event of the others builds complete.
func TestSuspectIDMidRun(t *testing.T) {
	logs := &logRecorder{}
	h := newHarness(t, Config{Groups: sixteen(), Timeout: time.Hour, BatchLatency: time.Millisecond,
		MaxOpenEvents: 64, SuspectDistance: 64, Logger: logs.logger()}, true)
	rel := newReleases()
	sendEvents(t, h.b, sixteen(), 0, 500)
	for _, bad := range []uint64{1 << 63, 1 << 40, 5000} {
		mustAdd(t, h.b, frag(3, bad, "bad", false, 0), rel.next())
	}
	mustAdd(t, h.b, frag(7, 2, "behind", false, 0), rel.next()) // far behind, own counter jumped back: a vote, refuted
	sendEvents(t, h.b, sixteen(), 500, 500)
	rows := h.close()
	rel.check(t)
	l := h.b.Ledger()
	checkBalanced(t, l)
	if l.EventsComplete != 1000 || l.EventsBuilt != 1000 || len(rows) != 1000 {
		t.Fatalf("%d events built, %d complete, want 1000 and 1000: %+v", l.EventsBuilt, l.EventsComplete, l)
	}
	// 5000 is suspect too: the others are at 499, more than 64 behind it,
	// and never reach it. (An id they reach while it is held is confirmed:
	// a wrong id within reach cannot be told from a right one.)
	if l.Discarded[ReasonSuspect] != 4 || l.SuspectBySource[3] != 3 || l.SuspectBySource[7] != 1 || len(l.SuspectBySource) != 2 {
		t.Fatalf("suspect discards %d by source %v, want 4 (3 of source 3, 1 of source 7)", l.Discarded[ReasonSuspect], l.SuspectBySource)
	}
	if l.Discarded[ReasonLate] != 0 || l.Resyncs != 0 {
		t.Fatalf("late %d, resyncs %d, want 0, 0", l.Discarded[ReasonLate], l.Resyncs)
	}
	if n := logs.count("suspect_id"); n != 4 {
		t.Errorf("%d suspect log records, want 4:\n%s", n, logs)
	}
}

// An id the others reach before its timeout is confirmed: a jump of every
// source's counter (as ATLAS's ECR does to the extended L1ID) builds every
// event, none suspect.
func TestJumpAheadConfirmed(t *testing.T) {
	h := newHarness(t, Config{Groups: sixteen(), Timeout: time.Hour, BatchLatency: time.Millisecond}, true)
	sendEvents(t, h.b, sixteen(), 0, 100)
	sendEvents(t, h.b, sixteen(), 1<<24, 100)
	h.close()
	l := h.b.Ledger()
	checkBalanced(t, l)
	if l.EventsComplete != 200 || l.Discards() != 0 {
		t.Fatalf("%d events complete (want 200), discarded %v", l.EventsComplete, l.Discarded)
	}
}

// A counter reset where the sources do not jump together: ten of sixteen
// reset while six still finish the old epoch's last events (which stay
// open and build complete), then follow. Both epochs build complete.
func TestResyncWithLaggards(t *testing.T) {
	logs := &logRecorder{}
	groups := sixteen()
	h := newHarness(t, Config{Groups: groups, Timeout: time.Hour, BatchLatency: time.Millisecond,
		MaxOpenEvents: 64, SuspectDistance: 64, Logger: logs.logger()}, true)
	send := func(srcs []uint32, first, n uint64, epoch int) {
		for id := first; id < first+n; id++ {
			for _, s := range srcs {
				mustAdd(t, h.b, frag(s, id, fmt.Sprint(epoch, "/", s, "/", id), false, 0), nil)
			}
		}
	}
	early, late := groups[0].Sources[:10], groups[0].Sources[10:]
	send(groups[0].Sources, 0, 990, 0)
	send(early, 990, 10, 0)
	send(early, 0, 20, 1) // the reset: a quorum (9) of them jumps back
	send(late, 990, 10, 0)
	for id := uint64(0); id < 1000; id++ {
		if id < 20 {
			send(late, id, 1, 1)
			continue
		}
		send(groups[0].Sources, id, 1, 1)
	}
	rows := h.close()
	l := h.b.Ledger()
	checkBalanced(t, l)
	if l.EventsComplete != 2000 || l.Discards() != 0 || l.Resyncs != 1 {
		t.Fatalf("%d events complete (want 2000), discarded %v, %d resyncs (want 1)", l.EventsComplete, l.Discarded, l.Resyncs)
	}
	for _, r := range rows {
		want := ""
		for s, p := range r.payloads {
			e := string(p[:1])
			if want == "" {
				want = e
			} else if e != want {
				t.Fatalf("event %d mixes epochs: source %d has %q", r.id, s, p)
			}
		}
	}
	if n := logs.count("resync"); n != 1 {
		t.Errorf("%d resync log records, want 1:\n%s", n, logs)
	}
}

// One source alone is everyone: its counter reset is a resync.
func TestResyncOneSource(t *testing.T) {
	groups := []schemas.SourceGroup{{Name: "only", Sources: []uint32{9}}}
	h := newHarness(t, Config{Groups: groups, Timeout: time.Hour, BatchLatency: time.Millisecond, MaxOpenEvents: 8, SuspectDistance: 8}, true)
	sendEvents(t, h.b, groups, 0, 100)
	sendEvents(t, h.b, groups, 0, 100)
	h.close()
	if l := h.b.Ledger(); l.EventsComplete != 200 || l.Resyncs != 1 || l.Discards() != 0 {
		t.Fatalf("ledger %+v", l)
	}
}

// Suspect fragments have their own bound: past MaxSuspectEvents, or past
// a quarter of it for one source, they are discarded at once, and they
// never take the room of the others' events.
func TestSuspectEventsBounded(t *testing.T) {
	h := newHarness(t, Config{Groups: sixteen(), Timeout: time.Hour, BatchLatency: time.Millisecond,
		MaxOpenEvents: 16, SuspectDistance: 16, MaxSuspectEvents: 8}, true)
	rel := newReleases()
	sendEvents(t, h.b, sixteen(), 0, 10)
	for i := range uint64(100) {
		// They would block forever if they took normal room (16 events).
		mustAdd(t, h.b, frag(5, 1<<50+i, "x", false, 0), rel.next())
		mustAdd(t, h.b, frag(6, 1<<51+i, "y", false, 0), rel.next())
	}
	h.b.mu.Lock()
	held, by5, by6 := h.b.heldSuspect, h.b.ident.heldBy[5], h.b.ident.heldBy[6]
	h.b.mu.Unlock()
	if held != 4 || by5 != 2 || by6 != 2 {
		t.Errorf("%d suspect events held (%d by source 5, %d by 6), want 4 (2, 2)", held, by5, by6)
	}
	sendEvents(t, h.b, sixteen(), 10, 100)
	h.close()
	rel.check(t)
	l := h.b.Ledger()
	checkBalanced(t, l)
	if l.EventsComplete != 110 || l.SuspectBySource[5] != 100 || l.SuspectBySource[6] != 100 || l.Discards() != 200 {
		t.Fatalf("ledger %+v", l)
	}
}

// logRecorder collects log records as text.
type logRecorder struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (r *logRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(p)
}

func (r *logRecorder) logger() *slog.Logger { return slog.New(slog.NewTextHandler(r, nil)) }

func (r *logRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

// count is the number of records whose text contains s.
func (r *logRecorder) count(s string) int {
	n := 0
	for _, line := range strings.Split(r.String(), "\n") {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// An event opened before the reference existed, still open after a counter
// reset, is built (it was never suspect), not judged by the new epoch.
func TestUnjudgedEventSurvivesResync(t *testing.T) {
	groups := []schemas.SourceGroup{{Name: "all", Sources: []uint32{0, 1, 2, 3}}}
	h := newHarness(t, Config{Groups: groups, Timeout: time.Hour, BatchLatency: time.Millisecond, MaxOpenEvents: 8, SuspectDistance: 8}, true)
	mustAdd(t, h.b, frag(0, 5, "alone", false, 0), nil) // no reference yet
	sendEvents(t, h.b, groups, 10, 100)
	sendEvents(t, h.b, groups, 0, 5)
	rows := h.close()
	l := h.b.Ledger()
	checkBalanced(t, l)
	if l.Resyncs != 1 || l.EventsComplete != 105 || l.EventsIncomplete != 1 || l.Discards() != 0 || len(rows) != 106 {
		t.Fatalf("%d rows; ledger %+v", len(rows), l)
	}
}

// A common jump delivered source by source (a farm BU's assignments fed
// one source's packets after another's): with the rule on, the first
// sources lose their fragments past their share of held events (the
// documented limit); with SuspectDistance at its maximum, as a farm node
// sets it until it gives the builder its assignments, nothing is lost.
func TestSourceMajorJump(t *testing.T) {
	groups := []schemas.SourceGroup{{Name: "all", Sources: []uint32{0, 1, 2, 3, 4, 5}}}
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprint("off=", off), func(t *testing.T) {
			cfg := Config{Groups: groups, Timeout: time.Hour, BatchLatency: time.Millisecond}
			if off {
				cfg.SuspectDistance = math.MaxUint64
			}
			h := newHarness(t, cfg, true)
			for r := uint64(0); r < 3; r++ {
				for _, s := range groups[0].Sources {
					for id := r * 200000; id < r*200000+500; id++ {
						mustAdd(t, h.b, frag(s, id, "x", false, 0), nil)
					}
				}
			}
			h.close()
			l := h.b.Ledger()
			checkBalanced(t, l)
			if off && (l.EventsComplete != 1500 || l.Discards() != 0) {
				t.Fatalf("rule off: %+v", l)
			}
			if !off && (l.Discarded[ReasonSuspect] == 0 || l.EventsComplete < 500) {
				t.Fatalf("rule on: %+v", l)
			}
			t.Logf("complete %d, suspect %d by source %v", l.EventsComplete, l.Discarded[ReasonSuspect], l.SuspectBySource)
		})
	}
}

// A suspect fragment that opens its held event while the ready queue
// holds more than MaxOpenEvents events (a suspect event that completed
// counts among them once emitted), with the adder's context already done:
// the fragment must be placed or discarded, never leave an open event
// without fragments (which a flush then dissolved with none, or emitted
// empty). The FuzzBuilder finding of the 2026-12-02 fuzz run, whose
// timing (the emitter not yet having assembled the ready events) this
// makes certain with a batch latency of an hour.
func TestSuspectOpenedOverReadyEvents(t *testing.T) {
	groups := []schemas.SourceGroup{{Name: "a", Sources: []uint32{0, 1}}, {Name: "b", Sources: []uint32{2}}}
	h := newHarness(t, Config{Groups: groups, Timeout: time.Hour, BatchLatency: time.Hour, BatchEvents: 100,
		MaxOpenEvents: 4, MaxSuspectEvents: 4, SuspectDistance: 4, MaxBufferedBytes: 1 << 10}, true)
	rel := newReleases()
	sendEvents(t, h.b, groups, 10, 4) // 4 complete events ready: normal room is full
	// Event 100 opens suspect (far from the reference 13) and completes.
	for s := range uint32(3) {
		mustAdd(t, h.b, frag(s, 100, "s", false, 0), rel.next())
	}
	h.b.mu.Lock()
	held, suspect := h.b.held, h.b.heldSuspect
	h.b.mu.Unlock()
	if held != 5 || suspect != 0 {
		t.Fatalf("%d events held, %d suspect; want 5 ready, none suspect", held, suspect)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	// Far from the reference (100): suspect, which never waits for room.
	if err := h.b.AddFragment(done, frag(0, 200, "far", false, 0), rel.next()); err != nil {
		t.Fatalf("suspect fragment: %v (it must not wait for normal room)", err)
	}
	h.b.mu.Lock()
	var empty []uint64
	for ev := h.b.head; ev != nil; ev = ev.next {
		if ev.frags == 0 {
			empty = append(empty, ev.key)
		}
	}
	suspect = h.b.heldSuspect
	h.b.mu.Unlock()
	if len(empty) > 0 || suspect != 1 {
		t.Fatalf("open events without fragments %v, %d suspect events held (want none, 1)", empty, suspect)
	}
	flush(t, h.b)
	h.close()
	rel.check(t)
	l := h.b.Ledger()
	checkBalanced(t, l)
	if l.EventsComplete != 5 || l.SuspectBySource[0] != 1 || l.Discards() != 1 {
		t.Fatalf("ledger %+v", l)
	}
}
