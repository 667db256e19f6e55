//go:build invariants

package shm

import (
	"context"
	"testing"

	"github.com/sluice-daq/sluice/internal/invariants"
)

// The ring's checks must be able to fail: break the reader's and the
// writer's bookkeeping one piece at a time and expect a Violation naming it.
func TestRingInvariantsCatchBrokenState(t *testing.T) {
	name := ringName(t)
	w, r := openRing(t, name, 8192)
	ctx := context.Background()
	for range 2 {
		if err := w.Write(ctx, make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := r.Next(ctx); err != nil {
		t.Fatal(err)
	}
	want := func(what string, fn func()) {
		t.Helper()
		defer func() {
			v, ok := recover().(invariants.Violation)
			if !ok {
				t.Fatalf("%s: no invariants.Violation", what)
			}
			t.Log(v.Error())
		}()
		fn()
	}
	r.mu.Lock()
	r.out++
	want("unreleased count", func() { r.checkLocked("test") })
	r.out--
	r.read += recordAlign
	want("read cursor", func() { r.checkLocked("test") })
	r.read -= recordAlign
	r.mu.Unlock()

	w.w++
	want("record boundary", func() { w.check("test") })
	w.w--
	w.w += 2 * 8192
	want("write ahead of ack", func() { w.check("test") })
	w.w -= 2 * 8192
}
