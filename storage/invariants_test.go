//go:build invariants

package storage

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/internal/invariants"
	"github.com/sluice-daq/sluice/schemas"
)

// wantViolation runs fn and fails unless it panics with an invariants.Violation.
func wantViolation(t *testing.T, fn func()) {
	t.Helper()
	defer func() {
		v, ok := recover().(invariants.Violation)
		if !ok || v.Where != "store" {
			t.Fatalf("want a store invariants.Violation, got %+v", v)
		}
		t.Log(v.What)
	}()
	fn()
}

// The store's checks must be able to fail: a batch that was never written,
// and a commit whose reported counts are not what the ledger shows.
func TestStoreInvariantsCatchBrokenState(t *testing.T) {
	s := openTest(t, nil)
	evs := genEvents(3, 0, 3, 1, 2000)
	put(t, s, Deferred, evs)

	rec := buildBatch(t, memory.DefaultAllocator, genEvents(3, 100, 2, 1, 10))
	defer rec.Release()
	eb, err := schemas.NewEventBatch(rec)
	if err != nil {
		t.Fatal(err)
	}
	wantViolation(t, func() { s.checkPut(Deferred, eb, allRows(eb.Len()), s.commits.Load()) })

	c, _ := s.NewCursor(Deferred, CursorOptions{})
	b, err := c.Next()
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	out := []schemas.Verdict{{Decision: schemas.DecisionAccept}, {Decision: schemas.DecisionReject}, {Decision: schemas.DecisionDefer}}
	before := s.ledgerBefore()
	ca, err := s.Commit(b, out)
	if err != nil {
		t.Fatal(err)
	}
	ca.Accepted++ // as if the commit had reported one more than it applied
	wantViolation(t, func() { s.checkCommit(before, b, out, ca) })
	out[1].Decision = schemas.DecisionDefer // the rejected event is gone, not kept
	ca.Accepted--
	wantViolation(t, func() { s.checkCommit(before, b, out, ca) })
}
