package e2e

import (
	"testing"
	"time"
)

// TestFarmReadoutBehind: under push, one node's readout runs behind the
// others' (farm-b's emulator paced at 20 events/s, farm-a's and farm-c's
// at 50; farm.wait 1 s): the EM announces the assignments farm-a's
// trigger source names seconds before farm-b has read their events. farm-b's
// RU waits on for its sources, behind and still sending, and the BUs for
// its final data: every event is built complete, none lost, no packet
// late, the farm and node ledgers balance. Before, an RU sent what it had
// once farm.wait passed and the BUs built without the rest: every event
// whose farm-b data came more than 1 s after its announcement (about two
// thirds of them) was incomplete and farm-b's packets counted late.
func TestFarmReadoutBehind(t *testing.T) {
	const loop, rate, slow = 10, 50, 20
	f := newFarmRun(t, 6719301, loop, rate)
	for _, n := range farmNodes {
		editFile(t, f.files[n], [2]string{`wait: 5s`, `wait: 1s`})
	}
	editFile(t, f.files["farm-b"], [2]string{`rate: 50\b`, `rate: 20`})
	want := uint64(loop * 10)
	for _, n := range farmNodes {
		f.start(n)
	}
	f.waitFor("every event built", 90*time.Second, farmNodes, func(st memberStatus) bool { return built(st, want) })
	f.stop(farmNodes)
	l := f.status().Ledger
	if !l.Balanced || l.Built != want || l.LostTotal() != 0 {
		t.Fatalf("farm ledger: %s", l)
	}
	var events uint64
	for _, n := range farmNodes {
		nl := readLedger(t, f.sums[n])
		fl := nl.Farm
		if !nl.Balanced || fl == nil || fl.Agent.RU == nil || fl.Agent.BU == nil {
			t.Fatalf("%s ledger: %+v (farm %+v)", n, nl, fl)
		}
		ru, bu := fl.Agent.RU, fl.Agent.BU
		var missing uint64
		for _, m := range ru.Missing {
			missing += m
		}
		t.Logf("%s: built %d, incomplete %d; RU waited behind %d, missing %d, late %d; BU waited for a final %d, timed out %d",
			n, nl.EventsBuilt, nl.EventsIncomplete, ru.WaitedBehind, missing, ru.Late, bu.WaitedFinal, bu.FinalTimedOut)
		if nl.EventsIncomplete != 0 || missing != 0 || ru.Late != 0 || ru.Held != 0 || bu.Incomplete != 0 || bu.FinalTimedOut != 0 {
			t.Errorf("%s: %d events incomplete, RU sent %d elements without its data (of %d sources), %d packets late, %d held; BU: %d assignments incomplete, %d built at the behind limit",
				n, nl.EventsIncomplete, missing, len(ru.Missing), ru.Late, ru.Held, bu.Incomplete, bu.FinalTimedOut)
		}
		if n == "farm-b" && ru.WaitedBehind == 0 {
			t.Errorf("farm-b's RU never waited for its sources behind: the readout was not behind, the test tests nothing")
		}
		events += nl.EventsBuilt
	}
	if events != want {
		t.Fatalf("%d events built across the nodes, want %d", events, want)
	}
}
