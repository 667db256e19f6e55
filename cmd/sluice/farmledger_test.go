package main

import (
	"testing"

	"github.com/sluice-daq/sluice/node/farm"
	"github.com/sluice-daq/sluice/node/farm/control"
)

// TestLedgerFault: `farm status --ledger` exits 2 for a violation, or for
// open elements once the run is stopped; not for open elements of a run
// going on (a monitoring script read that as a failure).
func TestLedgerFault(t *testing.T) {
	running := &control.RunState{State: control.StateRunning}
	stopped := &control.RunState{State: control.StateStopped}
	open := &farm.LedgerSummary{Announced: 680, Built: 280, Open: 400}
	bad := &farm.LedgerSummary{Announced: 10, Built: 10, Violations: 1}
	ok := &farm.LedgerSummary{Announced: 10, Built: 10, Balanced: true}
	for _, c := range []struct {
		run   *control.RunState
		l     *farm.LedgerSummary
		fault bool
	}{
		{running, open, false}, {stopped, open, true}, {nil, open, true},
		{running, bad, true}, {stopped, ok, false}, {running, ok, false},
	} {
		if got := ledgerFault(control.Status{Run: c.run, Ledger: c.l}); got != c.fault {
			t.Errorf("run %+v ledger %+v: fault %v, want %v", c.run, c.l, got, c.fault)
		}
	}
}
