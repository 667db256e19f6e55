package plugins

import (
	"context"
	"sync"
)

// A stage's counter prescales (the 1st, (N+1)th, (2N+1)th … firing of a
// line kept) depend on the order batches pass it. The node decides batches
// in parallel (a worker per plugin instance, and one more), so which
// events a prescale kept depended on which worker got there first (with
// two workers `scripts/golden.sh` saw one event more or less prescaled
// from run to run). The node numbers its batches (WithBatchOrder) and
// each stage applies its prescales in that order.

type orderKey struct{}

// WithBatchOrder returns ctx carrying seq, the batch's place in the order
// its caller emits batches: 0, 1, 2, … without gaps. Chain.Decide then
// applies every stage's counter prescales to the batches in that order,
// waiting (until ctx ends) for those before; so each seq from 0 on must
// reach Chain.Decide or Chain.SkipBatch. Without it (replay) a batch's
// prescales apply as soon as it is decided.
func WithBatchOrder(ctx context.Context, seq uint64) context.Context {
	return context.WithValue(ctx, orderKey{}, seq)
}

func batchOrder(ctx context.Context) (uint64, bool) {
	seq, ok := ctx.Value(orderKey{}).(uint64)
	return seq, ok
}

// turns lets batches through in sequence order: seq's turn comes once
// every earlier seq has passed.
type turns struct {
	mu     sync.Mutex
	next   uint64                   // the seq whose turn it is
	passed map[uint64]bool          // later seqs already passed
	wake   map[uint64]chan struct{} // closed when that seq's turn comes
}

// wait blocks until seq's turn, or returns ctx.Err().
func (t *turns) wait(ctx context.Context, seq uint64) error {
	t.mu.Lock()
	if seq <= t.next {
		t.mu.Unlock()
		return nil
	}
	if t.wake == nil {
		t.wake = map[uint64]chan struct{}{}
	}
	ch := t.wake[seq]
	if ch == nil {
		ch = make(chan struct{})
		t.wake[seq] = ch
	}
	t.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// pass ends seq's turn, or records that seq will not take it; idempotent.
func (t *turns) pass(seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if seq < t.next {
		return
	}
	if seq > t.next {
		if t.passed == nil {
			t.passed = map[uint64]bool{}
		}
		t.passed[seq] = true
		return
	}
	// Invariant: every seq below next has passed, and passed holds only
	// seqs above next.
	for t.next++; t.passed[t.next]; t.next++ {
		delete(t.passed, t.next)
	}
	if ch := t.wake[t.next]; ch != nil {
		close(ch)
		delete(t.wake, t.next)
	}
}
