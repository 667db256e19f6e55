package builder

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/sluice-daq/sluice/schemas"
)

// fourSources: two groups, ids chosen non-contiguous to exercise the
// source index.
var fourSources = []schemas.SourceGroup{{Name: "velo", Sources: []uint32{10, 11}}, {Name: "calo", Sources: []uint32{20, 21}}}

// step is one action of a rule test: a fragment, or a Flush first.
type step struct {
	f     schemas.Fragment
	flush bool // Flush (and wait for delivery) before adding f
}

func TestEventRules(t *testing.T) {
	type want struct {
		id       uint64
		status   schemas.EventStatus
		nfrag    int
		missing  []uint32
		corrupt  []uint32
		dups     []uint32
		payloads map[uint32]string
	}
	all := func(id uint64) []step {
		return []step{{f: frag(10, id, "a", false, 0)}, {f: frag(11, id, "bb", false, 0)}, {f: frag(20, id, "ccc", false, 0)}, {f: frag(21, id, "", false, 0)}}
	}
	full := map[uint32]string{10: "a", 11: "bb", 20: "ccc"}
	cases := []struct {
		name    string
		steps   []step
		want    []want
		discard map[string]uint64
	}{
		{name: "complete", steps: all(7),
			want: []want{{id: 7, nfrag: 4, payloads: full}}},
		{name: "complete out of order across events",
			steps: append(append([]step{{f: frag(21, 9, "", false, 0)}}, all(8)...), all(9)[:3]...),
			want:  []want{{id: 8, nfrag: 4, payloads: full}, {id: 9, nfrag: 4, payloads: full}}},
		{name: "missing sources at flush",
			steps: []step{{f: frag(11, 1, "x", false, 0)}, {f: frag(20, 1, "y", false, 0)}},
			want:  []want{{id: 1, status: schemas.StatusIncomplete, nfrag: 2, missing: []uint32{10, 21}, payloads: map[uint32]string{11: "x", 20: "y"}}}},
		{name: "duplicate: first wins",
			steps:   append([]step{{f: frag(10, 3, "first", false, 0)}, {f: frag(10, 3, "second", false, 0)}}, all(3)[1:]...),
			want:    []want{{id: 3, status: schemas.StatusDuplicates, nfrag: 4, dups: []uint32{10}, payloads: map[uint32]string{10: "first", 11: "bb", 20: "ccc"}}},
			discard: map[string]uint64{ReasonDuplicate: 1}},
		{name: "duplicates of two sources, one of them twice",
			steps: append([]step{{f: frag(21, 3, "", false, 0)}, {f: frag(10, 3, "first", false, 0)}, {f: frag(21, 3, "x", false, 0)},
				{f: frag(10, 3, "second", false, 0)}, {f: frag(10, 3, "third", false, 0)}}, all(3)[1:3]...),
			want:    []want{{id: 3, status: schemas.StatusDuplicates, nfrag: 4, dups: []uint32{10, 21}, payloads: map[uint32]string{10: "first", 11: "bb", 20: "ccc"}}},
			discard: map[string]uint64{ReasonDuplicate: 3}},
		{name: "duplicate after emission, its batch still open",
			steps:   append(all(4), step{f: frag(11, 4, "again", false, 0)}),
			want:    []want{{id: 4, status: schemas.StatusDuplicates, nfrag: 4, dups: []uint32{11}, payloads: full}},
			discard: map[string]uint64{ReasonLate: 1}},
		{name: "late after emission",
			steps:   append(all(4), step{flush: true, f: frag(11, 4, "late", false, 0)}),
			want:    []want{{id: 4, nfrag: 4, payloads: full}},
			discard: map[string]uint64{ReasonLate: 1}},
		{name: "late after timeout-style flush of an incomplete event",
			steps:   []step{{f: frag(10, 5, "a", false, 0)}, {flush: true, f: frag(11, 5, "b", false, 0)}},
			want:    []want{{id: 5, status: schemas.StatusIncomplete, nfrag: 1, missing: []uint32{11, 20, 21}, payloads: map[uint32]string{10: "a"}}},
			discard: map[string]uint64{ReasonLate: 1}},
		{name: "unknown source",
			steps:   append(all(6), step{f: frag(99, 6, "who", false, 0)}),
			want:    []want{{id: 6, nfrag: 4, payloads: full}},
			discard: map[string]uint64{ReasonUnknownSource: 1}},
		{name: "corrupt CRC kept and flagged",
			steps: []step{{f: frag(10, 2, "a", false, 0)}, {f: frag(11, 2, "bad", true, 0)}, {f: frag(20, 2, "ccc", false, 0)}, {f: frag(21, 2, "", true, 0)}},
			want:  []want{{id: 2, status: schemas.StatusCorrupt, nfrag: 4, corrupt: []uint32{11, 21}, payloads: map[uint32]string{10: "a", 11: "bad", 20: "ccc"}}}},
		{name: "source error flag",
			steps: []step{{f: frag(10, 2, "a", false, schemas.FlagSourceError)}, {f: frag(11, 2, "bb", false, 0)}, {f: frag(20, 2, "ccc", false, 0)}, {f: frag(21, 2, "", false, 0)}},
			want:  []want{{id: 2, status: schemas.StatusSourceError, nfrag: 4, payloads: full}}},
		{name: "truncated flag",
			steps: []step{{f: frag(10, 2, "a", false, 0)}, {f: frag(11, 2, "bb", false, schemas.FlagTruncated)}, {f: frag(20, 2, "ccc", false, 0)}},
			want:  []want{{id: 2, status: schemas.StatusSourceError | schemas.StatusIncomplete, nfrag: 3, missing: []uint32{21}, payloads: full}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{Groups: fourSources, Run: 42, Timeout: time.Hour, BatchLatency: time.Hour}, true)
			rel := newReleases()
			for _, s := range tc.steps {
				if s.flush {
					if err := h.b.Flush(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				mustAdd(t, h.b, s.f, rel.next())
			}
			rows := h.close()
			rel.check(t)
			if len(rows) != len(tc.want) {
				t.Fatalf("%d events emitted, want %d: %+v", len(rows), len(tc.want), rows)
			}
			slices.SortFunc(rows, func(a, b row) int { return int(a.id) - int(b.id) })
			for i, w := range tc.want {
				r := rows[i]
				if r.id != w.id || r.status != w.status || r.nfrag != w.nfrag || r.run != 42 {
					t.Errorf("event %d: id %d status %b nfrag %d run %d; want id %d status %b nfrag %d run 42", i, r.id, r.status, r.nfrag, r.run, w.id, w.status, w.nfrag)
				}
				if !slices.Equal(r.missing, w.missing) || !slices.Equal(r.corrupt, w.corrupt) || !slices.Equal(r.dups, w.dups) || len(r.lates) != 0 {
					t.Errorf("event %d: missing %v corrupt %v duplicated %v late %v, want %v %v %v none", r.id, r.missing, r.corrupt, r.dups, r.lates, w.missing, w.corrupt, w.dups)
				}
				got := map[uint32]string{}
				for s, p := range r.payloads {
					got[s] = string(p)
				}
				if !reflect.DeepEqual(got, w.payloads) {
					t.Errorf("event %d: payloads %v, want %v", r.id, got, w.payloads)
				}
				if r.ts == 0 {
					t.Errorf("event %d: no arrival timestamp", r.id)
				}
			}
			l := h.b.Ledger()
			checkBalanced(t, l)
			for _, reason := range []string{ReasonDuplicate, ReasonLate, ReasonUnknownSource, ReasonCancelled, ReasonClosed, ReasonTooLarge} {
				if l.Discarded[reason] != tc.discard[reason] {
					t.Errorf("discarded %q = %d, want %d", reason, l.Discarded[reason], tc.discard[reason])
				}
			}
			if l.FragmentsOpen != 0 || l.EventsBuilt != uint64(len(tc.want)) {
				t.Errorf("after Close: open %d, built %d", l.FragmentsOpen, l.EventsBuilt)
			}
		})
	}
}

// A fragment that comes after its event timed out, while the event waits
// in the builder for its batch, is discarded as late and its source
// recorded on the event (late_sources); one after the batch left is only
// counted.
func TestLateSourceRecorded(t *testing.T) {
	h := newHarness(t, Config{Groups: fourSources, Timeout: 10 * time.Millisecond, BatchLatency: time.Hour}, true)
	mustAdd(t, h.b, frag(10, 5, "a", false, 0), nil)
	mustAdd(t, h.b, frag(20, 5, "c", false, 0), nil)
	waitFor(t, "event 5 to time out", func() bool {
		h.b.mu.Lock()
		defer h.b.mu.Unlock()
		return len(h.b.ready) == 1
	})
	mustAdd(t, h.b, frag(21, 5, "late", false, 0), nil)
	mustAdd(t, h.b, frag(11, 5, "later", false, 0), nil)
	mustAdd(t, h.b, frag(21, 5, "again", false, 0), nil)
	if err := h.b.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, h.b, frag(20, 5, "after the batch", false, 0), nil)
	rows := h.close()
	if len(rows) != 1 {
		t.Fatalf("%d events, want 1: %+v", len(rows), rows)
	}
	r := rows[0]
	if r.status != schemas.StatusIncomplete || !slices.Equal(r.missing, []uint32{11, 21}) || !slices.Equal(r.lates, []uint32{11, 21}) || len(r.dups) != 0 {
		t.Errorf("event 5: status %v missing %v late %v duplicated %v, want incomplete, 11 and 21 missing and late, none duplicated", r.status, r.missing, r.lates, r.dups)
	}
	if l := h.b.Ledger(); l.Discarded[ReasonLate] != 4 {
		t.Errorf("discarded late %d, want 4", l.Discarded[ReasonLate])
	}
}

func TestTimeoutEmitsIncomplete(t *testing.T) {
	h := newHarness(t, Config{Groups: fourSources, Timeout: 5 * time.Millisecond, BatchLatency: time.Millisecond}, false)
	mustAdd(t, h.b, frag(20, 77, "only", false, 0), nil)
	// No Flush: the event must come out by itself once its timeout passes.
	rec := <-h.b.Batches()
	h.take(rec)
	rows := h.snapshot()
	if len(rows) != 1 || rows[0].id != 77 || rows[0].status != schemas.StatusIncomplete || !slices.Equal(rows[0].missing, []uint32{10, 11, 21}) {
		t.Fatalf("timed-out event: %+v", rows)
	}
	l := h.b.Ledger()
	if l.EventsIncomplete != 1 || l.EventsComplete != 0 {
		t.Errorf("ledger: %+v", l)
	}
	checkBalanced(t, l)
}

func TestBatchClosesAtNEvents(t *testing.T) {
	h := newHarness(t, Config{Groups: []schemas.SourceGroup{{Name: "g", Sources: []uint32{1}}}, BatchEvents: 3, BatchLatency: time.Hour, Timeout: time.Hour}, true)
	for id := range uint64(7) {
		mustAdd(t, h.b, frag(1, id, "p", false, 0), nil)
	}
	waitFor(t, "two full batches", func() bool { return h.b.Ledger().BatchesBuilt == 2 })
	h.close()
	if !slices.Equal(h.batches, []int{3, 3, 1}) {
		t.Errorf("batch sizes %v, want [3 3 1]", h.batches)
	}
}

func TestBatchClosesAtLatency(t *testing.T) {
	h := newHarness(t, Config{Groups: []schemas.SourceGroup{{Name: "g", Sources: []uint32{1}}}, BatchEvents: 100, BatchLatency: 5 * time.Millisecond, Timeout: time.Hour}, false)
	mustAdd(t, h.b, frag(1, 1, "p", false, 0), nil)
	mustAdd(t, h.b, frag(1, 2, "q", false, 0), nil)
	rec := <-h.b.Batches() // closed by latency alone: no Flush, far from 100 events
	if rec.NumRows() != 2 {
		t.Errorf("batch of %d rows, want 2", rec.NumRows())
	}
	rec.Release()
}

func TestMaxOpenEventsBlocksAndUnblocks(t *testing.T) {
	h := newHarness(t, Config{Groups: []schemas.SourceGroup{{Name: "g", Sources: []uint32{1, 2}}}, MaxOpenEvents: 2, Timeout: time.Hour, BatchLatency: time.Hour}, false)
	ctx := context.Background()
	mustAdd(t, h.b, frag(1, 1, "a", false, 0), nil)
	mustAdd(t, h.b, frag(1, 2, "b", false, 0), nil)
	errc := make(chan error, 1)
	go func() { errc <- h.b.AddFragment(ctx, frag(1, 3, "c", false, 0), nil) }()
	waitFor(t, "the third event to block", func() bool { h.b.mu.Lock(); defer h.b.mu.Unlock(); return h.b.waiters == 1 })
	// The ledger balances while the add is blocked: the fragment is waiting.
	if l := h.b.Ledger(); l.FragmentsWaiting != 1 || !l.Balanced() {
		t.Fatalf("while blocked: waiting %d, balanced %v (%+v)", l.FragmentsWaiting, l.Balanced(), l)
	}
	// A fragment for an open event must not block.
	mustAdd(t, h.b, frag(2, 1, "a2", false, 0), nil)
	if err := <-errc; err != nil {
		t.Fatalf("unblocked add: %v", err)
	}
	rows := h.close()
	if len(rows) != 3 {
		t.Fatalf("%d events, want 3", len(rows))
	}
	checkBalanced(t, h.b.Ledger())
}

func TestUnreadBatchesBlockAddingAndCancel(t *testing.T) {
	h := newHarness(t, Config{Groups: []schemas.SourceGroup{{Name: "g", Sources: []uint32{1}}}, MaxOpenEvents: 2, BatchEvents: 1, Timeout: time.Hour, BatchLatency: time.Hour}, false)
	// Nobody reads: one batch waits in the channel, one in the emitter's
	// send, then two events fill MaxOpenEvents and the next add blocks.
	for id := range uint64(4) {
		mustAdd(t, h.b, frag(1, id, "p", false, 0), nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rel := newReleases()
	errc := make(chan error, 1)
	go func() { errc <- h.b.AddFragment(ctx, frag(1, 4, "blocked", false, 0), rel.next()) }()
	waitFor(t, "backpressure to block the add", func() bool { h.b.mu.Lock(); defer h.b.mu.Unlock(); return h.b.waiters == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("blocked add returned %v, want context.Canceled", err)
	}
	rel.check(t)
	l := h.b.Ledger()
	if l.Discarded[ReasonCancelled] != 1 {
		t.Errorf("cancelled = %d, want 1", l.Discarded[ReasonCancelled])
	}
	checkBalanced(t, l)
	// Reading one batch makes room again.
	h.startCollecting()
	mustAdd(t, h.b, frag(1, 5, "after", false, 0), nil)
	rows := h.close()
	if len(rows) != 5 {
		t.Errorf("%d events, want 5", len(rows))
	}
}

func TestMaxBufferedBytesBlocksUntilTimeoutFrees(t *testing.T) {
	h := newHarness(t, Config{Groups: []schemas.SourceGroup{{Name: "g", Sources: []uint32{1, 2}}}, MaxBufferedBytes: 100, Timeout: 20 * time.Millisecond, BatchLatency: time.Millisecond}, true)
	big := string(make([]byte, 60))
	mustAdd(t, h.b, frag(1, 1, big, false, 0), nil)
	// 120 bytes would exceed 100: this blocks until event 1 times out.
	mustAdd(t, h.b, frag(1, 2, big, false, 0), nil)
	rows := h.close()
	if len(rows) != 2 || rows[0].status != schemas.StatusIncomplete {
		t.Fatalf("rows %+v", rows)
	}
	checkBalanced(t, h.b.Ledger())
}

func TestCloseRefusesAndIsIdempotent(t *testing.T) {
	h := newHarness(t, Config{Groups: fourSources}, true)
	mustAdd(t, h.b, frag(10, 1, "a", false, 0), nil)
	rows := h.close()
	if len(rows) != 1 || rows[0].status&schemas.StatusIncomplete == 0 {
		t.Fatalf("Close did not emit the open event: %+v", rows)
	}
	rel := newReleases()
	if err := h.b.AddFragment(context.Background(), frag(11, 1, "b", false, 0), rel.next()); !errors.Is(err, ErrClosed) {
		t.Errorf("AddFragment after Close: %v", err)
	}
	rel.check(t)
	if err := h.b.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
	l := h.b.Ledger()
	if l.Discarded[ReasonClosed] != 1 {
		t.Errorf("closed = %d", l.Discarded[ReasonClosed])
	}
	checkBalanced(t, l)
}

func TestConfigErrors(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no sources":        {},
		"duplicate source":  {Groups: []schemas.SourceGroup{{Name: "a", Sources: []uint32{1}}, {Name: "b", Sources: []uint32{1}}}},
		"bad mode":          {Mode: "burst", Groups: fourSources},
		"no slice duration": {Mode: schemas.ModeTimeslice, Groups: fourSources},
		"overlap too big":   {Mode: schemas.ModeTimeslice, Groups: fourSources, SliceDuration: 10, Overlap: 10},
		"negative timeout":  {Groups: fourSources, Timeout: -1},
		"unnamed group":     {Groups: []schemas.SourceGroup{{Sources: []uint32{1}}}},
		"late window":       {Groups: fourSources, LateWindow: MaxLateWindow + 1},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err %v, want ErrConfig", name, err)
		}
	}
}

// TestUnsortedGroupsPayloadOrder: sources configured out of order still come
// out labelled right, because the builder sorts each group ascending, the
// order the schema metadata states.
func TestUnsortedGroupsPayloadOrder(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b, err := New(Config{Groups: []schemas.SourceGroup{{Name: "g", Sources: []uint32{30, 10, 20}}}, Allocator: mem, BatchEvents: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, src := range []uint32{30, 10, 20} {
		p := []byte{byte(src)}
		if err := b.AddFragment(ctx, schemas.Fragment{SourceID: src, EventID: 1, CRC: schemas.Checksum(p), Payload: p}, nil); err != nil {
			t.Fatal(err)
		}
	}
	rec := <-b.Batches()
	eb, err := schemas.NewEventBatch(rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []uint32{10, 20, 30} {
		if p, ok := eb.Payload(src, 0); !ok || len(p) != 1 || p[0] != byte(src) {
			t.Fatalf("source %d has payload %v", src, p)
		}
	}
	rec.Release()
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
