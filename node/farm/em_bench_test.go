package farm

import (
	"testing"

	"github.com/sluice-daq/sluice/internal/benchratio"
)

// BenchmarkEMAssign: assignments per second the EM sustains, push
// protocol, 16 BUs, 1000 events per assignment (LHCb Run 3: 30 MHz at a
// packing factor of 1000 needs 30 k/s). One op is one assignment's whole
// life in the EM: its announcement, the pick of a BU by weighted
// round-robin, the assignment, its release (grouped by 8 per BU), the
// credit that returns, and the ledger's bookkeeping. Baseline, same run
// and count: inserting each assignment's record into a plain Go map and
// deleting it 128 assignments later, the least any EM must do per
// assignment (ratio = baseline time / EM time).
func BenchmarkEMAssign(b *testing.B) {
	const (
		nBU   = 16
		size  = 1000
		group = 8
	)
	m, err := NewEM(EMConfig{Protocol: Push, AssignmentSize: size, Release: OutcomeDecided, BlockSize: 1 << 20}, 1, SystemClock{})
	if err != nil {
		b.Fatal(err)
	}
	var end uint64 = 1
	reserve := func() {
		for _, o := range m.Outputs() {
			if o.Kind == OutReserve {
				if err := m.Reserved(Block{First: end, End: end + 1<<20}); err != nil {
					b.Fatal(err)
				}
				end += 1 << 20
			}
		}
	}
	reserve()
	names := make([]string, nBU)
	fifo := make(map[string][]ReleaseEntry, nBU)
	for i := range names {
		names[i] = string(rune('a' + i))
		m.Join(names[i], uint64(i+1))
		m.Credit(Credit{Epoch: 1, Incarnation: uint64(i + 1), BU: names[i], Events: 4 * group * size, Bytes: 1 << 50})
	}
	inc := map[string]uint64{}
	for i, n := range names {
		inc[n] = uint64(i + 1)
	}
	var next uint64
	subject := func(ops int) {
		for i := 0; i < ops; i++ {
			if err := m.Announce(Unit{Run: 1, Kind: UnitEvents, Ranges: []Range{{First: next, N: size}}}); err != nil {
				b.Fatal(err)
			}
			next += size
			for _, o := range m.Outputs() {
				switch o.Kind {
				case OutReserve:
					if err := m.Reserved(Block{First: end, End: end + 1<<20}); err != nil {
						b.Fatal(err)
					}
					end += 1 << 20
				case OutAssign:
					bu := o.Assign.BU
					fifo[bu] = append(fifo[bu], ReleaseEntry{Assignment: o.Assign.ID, Outcome: OutcomeDecided, Events: size, Bytes: size * 100})
					if len(fifo[bu]) == group {
						m.Release(Release{Incarnation: inc[bu], BU: bu, Entries: fifo[bu]})
						m.Credit(Credit{Epoch: 1, Incarnation: inc[bu], BU: bu, Events: group * size, Bytes: group * size * 100})
						fifo[bu] = fifo[bu][:0]
					}
				}
			}
		}
	}
	type record struct {
		id   uint64
		unit Unit
	}
	base := map[uint64]*record{}
	var bid uint64
	baseline := func(ops int) {
		for i := 0; i < ops; i++ {
			bid++
			base[bid] = &record{id: bid, unit: Unit{Run: 1, Kind: UnitEvents, Ranges: []Range{{First: bid * size, N: size}}}}
			delete(base, bid-128)
		}
	}
	benchratio.Compare(b, subject, baseline)
	if s := m.Stats(); s.Assigned < uint64(b.N) || s.Queued != 0 {
		b.Fatalf("EM fell behind: %+v after %d announcements", s, b.N)
	}
	if l := m.Ledger().Summary(); l.Violations != 0 {
		b.Fatalf("ledger violations: %v", l.Problems)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "assignments/s")
}
