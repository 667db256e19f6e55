package storage

import (
	"errors"
	"io"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/schemas"
)

// TestConcurrentWriterAndReplay writes deferred events while a replay
// reads and commits them. Once the writer is done and the replay has
// drained the stream, every written event must be accepted or rejected
// exactly once.
func TestConcurrentWriterAndReplay(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := openTest(t, nil)
	const batches, per = 40, 10
	var wg sync.WaitGroup
	writerDone := make(chan struct{})
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(writerDone)
		for i := 0; i < batches && werr == nil; i++ {
			evs := genEvents(1, uint64(i*per), per, 1, 5000)
			rec := buildBatch(t, nil, evs)
			eb, err := schemas.NewEventBatch(rec)
			if err == nil {
				_, err = s.Put(Deferred, eb, metas(evs), nil)
			}
			rec.Release()
			werr = err
		}
	}()
	c, err := s.NewCursor(Deferred, CursorOptions{BatchSize: 7, Mem: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seen := map[uint64]int{}
	done := false
	for {
		b, err := c.Next()
		if errors.Is(err, io.EOF) {
			if done {
				break
			}
			select {
			case <-writerDone:
				done = true // one more pass for what was written meanwhile
			default:
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < b.Events.Len(); i++ {
			id := b.Events.EventID(i)
			seen[id]++
			if err := checkRow(b.Events, b.Verdicts[i], i, genEvent(1, id, 5000), 0); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Commit(b, replayOutcomes(b.Events)); err != nil {
			t.Fatal(err)
		}
		b.Release()
	}
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	if len(seen) != batches*per {
		t.Fatalf("replay saw %d distinct events, %d were written", len(seen), batches*per)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("event %d replayed %d times", id, n)
		}
	}
	led, _ := s.Ledger()
	if led.Accepted+led.Rejected != batches*per {
		t.Fatalf("ledger %+v, want %d outcomes", led, batches*per)
	}
	if left, _ := readAll(t, s, Deferred, CursorOptions{}); len(left) != 0 {
		t.Fatalf("%d events left deferred", len(left))
	}
	acc, _ := readAll(t, s, Accepted, CursorOptions{})
	if uint64(len(acc)) != led.Accepted {
		t.Fatalf("%d accepted events, ledger says %d", len(acc), led.Accepted)
	}
}

// TestCommitOutcomes checks each decision's effect, deferring again, and
// that a batch committed twice is refused as a whole.
func TestCommitOutcomes(t *testing.T) {
	s := openTest(t, nil)
	evs := genEvents(3, 0, 3, 1, 2000)
	put(t, s, Deferred, evs)
	c, _ := s.NewCursor(Deferred, CursorOptions{})
	b, err := c.Next()
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	out := []schemas.Verdict{
		{Decision: schemas.DecisionAccept, Lines: 5, Stage: "hlt2"},
		{Decision: schemas.DecisionReject, Stage: "hlt2"},
		{Decision: schemas.DecisionDefer, Stage: "hlt2", Reason: schemas.Reason{Text: "plugin crashed"}},
	}
	ca, err := s.Commit(b, out)
	if err != nil {
		t.Fatal(err)
	}
	if ca.Accepted != 1 || ca.Rejected != 1 || ca.Kept != 1 || !ca.Durable {
		t.Fatalf("commit ack %+v", ca)
	}
	keys, ms := readAll(t, s, Deferred, CursorOptions{})
	if len(keys) != 1 || keys[0].EventID != 2 || ms[0].Reason.Text != "plugin crashed" || ms[0].Decision != schemas.DecisionDefer {
		t.Fatalf("deferred after commit: %v %+v", keys, ms)
	}
	keys, ms = readAll(t, s, Accepted, CursorOptions{})
	if len(keys) != 1 || keys[0].EventID != 0 || ms[0].Lines != 5 {
		t.Fatalf("accepted after commit: %v %+v", keys, ms)
	}
	if _, err := s.Commit(b, out); !errors.Is(err, ErrAlreadyCommitted) {
		t.Fatalf("second commit of the same batch: %v, want ErrAlreadyCommitted", err)
	}
	if led, _ := s.Ledger(); led != (Ledger{Accepted: 1, Rejected: 1, Kept: 1}) {
		t.Fatalf("ledger %+v after a refused second commit", led)
	}
	if _, err := s.Commit(b, out[:2]); err == nil {
		t.Fatal("commit with fewer outcomes than events accepted")
	}
}
