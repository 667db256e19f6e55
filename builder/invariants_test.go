//go:build invariants

package builder

import (
	"context"
	"errors"
	"testing"

	"github.com/sluice-daq/sluice/internal/invariants"
	"github.com/sluice-daq/sluice/schemas"
)

// TestInvariantsCatchBrokenState breaks one piece of bookkeeping at a time
// and checks the invariants check names it: a check that cannot fail would
// make the invariants build prove nothing.
func TestInvariantsCatchBrokenState(t *testing.T) {
	for _, tc := range []struct {
		name          string
		breakIt, mend func(b *Builder)
	}{
		{"ledger", func(b *Builder) { b.led.FragmentsIn++ }, func(b *Builder) { b.led.FragmentsIn-- }},
		{"held events", func(b *Builder) { b.held++ }, func(b *Builder) { b.held-- }},
		{"open list", func(b *Builder) { b.head.open = false }, func(b *Builder) { b.head.open = true }},
		{"slot count", func(b *Builder) { b.head.present++ }, func(b *Builder) { b.head.present-- }},
		{"table", func(b *Builder) { b.table.remove(b.head) }, func(b *Builder) { b.table.put(b.head) }},
		{"suspect events", func(b *Builder) { b.heldSuspect++ }, func(b *Builder) { b.heldSuspect-- }},
		{"suspect events by source", func(b *Builder) { b.ident.heldBy[1]++ }, func(b *Builder) { b.ident.heldBy[1]-- }},
		{"sources in epoch", func(b *Builder) { b.ident.inEpoch++ }, func(b *Builder) { b.ident.inEpoch-- }},
		{"unresolved votes", func(b *Builder) { b.ident.src[1].ep, b.ident.votes, b.ident.quorum = 1, 1, 1 },
			func(b *Builder) { b.ident.src[1].ep, b.ident.votes, b.ident.quorum = noEpoch, 0, 2 }},
		{"suspect discards by source", func(b *Builder) { b.ident.suspectBy[0]++ }, func(b *Builder) { b.ident.suspectBy[0]-- }},
		{"event epoch", func(b *Builder) { b.head.epoch = 5 }, func(b *Builder) { b.head.epoch = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := New(Config{Groups: []schemas.SourceGroup{{Name: "a", Sources: []uint32{1, 2}}}})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close(context.Background())
			if err := b.AddFragment(context.Background(), schemas.Fragment{SourceID: 1, EventID: 7, CRC: schemas.Checksum([]byte("x")), Payload: []byte("x")}, nil); err != nil {
				t.Fatal(err)
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			tc.breakIt(b)
			defer tc.mend(b) // Close checks again
			defer func() {
				r := recover()
				v, ok := r.(invariants.Violation)
				if !ok {
					t.Fatalf("recovered %v, want an invariants.Violation", r)
				}
				var err error = v
				if !errors.As(err, &v) || v.Where != "builder" {
					t.Fatalf("violation %+v", v)
				}
				t.Log(v.What)
			}()
			b.checkLocked("test")
		})
	}
}
