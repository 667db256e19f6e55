package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node"
	"github.com/sluice-daq/sluice/node/farm"
)

// emKillRate is the RUs' pace in TestFarmEMKill (events/s per RU): 300
// events over ~6 s, so most of the readout comes after the kill and the
// new EM must assign it.
const emKillRate = 50

// emFarm starts etcd, the EM-only farm-e and, once it leads, the three
// folded nodes (paced at emKillRate), and waits until 30 events were
// built under farm-e: it returns the farm, farm-e and its epoch.
func emFarm(t *testing.T, run uint32) (*faultFarm, *proc, uint64) {
	t.Helper()
	ff := newFaultFarm(t, run, "em")
	for _, n := range farmNodes {
		editFile(t, ff.files[n], [2]string{fmt.Sprintf(`rate: %d\n`, faultRate), fmt.Sprintf("rate: %d\n", emKillRate)})
	}
	e := ff.start("farm-e")
	var epoch0 uint64
	ff.waitFor(30*time.Second, "farm-e to lead", func() bool {
		st := ff.status()
		if st.EM != nil && st.EM.Node == "farm-e" {
			epoch0 = st.EM.Epoch
			return true
		}
		return false
	})
	for _, n := range farmNodes {
		ff.start(n)
	}
	var before *farm.LedgerSummary
	ff.waitFor(60*time.Second, "30 events built under farm-e", func() bool {
		before = ff.status().Ledger
		return before != nil && before.Built >= 30
	})
	if before.Announced >= ff.want {
		t.Fatalf("every event was announced already: %s", before)
	}
	t.Logf("farm-e (EM, epoch %d): %d of %d events announced, %d built", epoch0, before.Announced, ff.want, before.Built)
	return ff, e, epoch0
}

// TestFarmEMKill: SIGKILL the event manager mid-run. The EM is an
// EM-only process (roles: em: no readout, no builder), elected before the
// three folded nodes start, so the kill hits the EM alone. Its election
// key goes with its lease; a folded node (an EM candidate too) is elected
// with a higher epoch, inherits the run's ledger the dead EM published,
// takes over what the BUs and RUs hold (their inventories: in-flight
// assignments adopted, settled ones carried over) and assigns the rest of
// the readout. Nothing is lost or built twice: the farm ledger balances
// with every announced event built once, nothing lost by any reason, no
// duplicate; the accepted streams of the stores hold every event once.
func TestFarmEMKill(t *testing.T) {
	ff, e, epoch0 := emFarm(t, 6718930)
	if err := e.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-e.done
	// An EM-only node stores nothing; its store, killed, is left as it is.
	delete(ff.stores, "farm-e")
	checkTakeover(t, ff, epoch0)
}

// checkTakeover: after farm-e stopped leading, another node is elected
// with a higher epoch and the run goes on to every event built; the farm
// stopped, the new EM's ledger balances with every announced event built
// once, nothing lost, no duplicate, every event stored once, each node's
// built count the farm ledger's; the new EM assigned work itself.
func checkTakeover(t *testing.T, ff *faultFarm, epoch0 uint64) {
	t.Helper()
	var epoch1 uint64
	var em1 string
	ff.waitFor(30*time.Second, "another EM elected", func() bool {
		st := ff.status()
		if st.EM != nil && st.EM.Node != "farm-e" && st.EM.Epoch > epoch0 {
			em1, epoch1 = st.EM.Node, st.EM.Epoch
			return true
		}
		return false
	})
	ff.waitFor(90*time.Second, "every announced event built", func() bool {
		l := ff.status().Ledger
		return l != nil && l.Announced == ff.want && l.Built == ff.want && l.Open == 0
	})
	ls := ff.stop(farmNodes...)
	l := ff.status().Ledger
	checkFarmLedger(t, l, ff.want, 0)
	if len(l.DuplicateIDs) != 0 {
		t.Fatalf("duplicate ids %v", l.DuplicateIDs)
	}
	checkStoresOnce(t, ff.stores, ff.want)
	st := newEMStats(t, ls, em1)
	if st.Epoch != epoch1 || st.Assigned == 0 || st.Conflicts != 0 || st.SilentParties != 0 {
		t.Fatalf("the new EM (%s, epoch %d): %+v", em1, epoch1, st)
	}
	// The nodes built every event between them; none built one twice
	// (each node's count is the farm ledger's for it).
	var sum uint64
	for _, n := range farmNodes {
		nl := ls[n]
		if nl.EventsBuilt != l.PerBU[n] {
			t.Fatalf("%s built %d events, the farm ledger says %d", n, nl.EventsBuilt, l.PerBU[n])
		}
		sum += nl.EventsBuilt
	}
	if sum != ff.want {
		t.Fatalf("the nodes built %d events, want %d", sum, ff.want)
	}
	t.Logf("%s took over as EM (epoch %d): adopted %d in-flight assignments, carried %d settled ones (%d events), assigned %d; %s",
		em1, epoch1, st.Adopted, st.AdoptedSettled, l.Carried, st.Assigned, l)
}

// newEMStats is the EM part of node em's final ledger.
func newEMStats(t *testing.T, ls map[string]node.Ledger, em string) farm.EMStats {
	t.Helper()
	l, ok := ls[em]
	if !ok || l.Farm == nil || l.Farm.Agent.EM == nil {
		t.Fatalf("%s's final ledger has no EM part", em)
	}
	return *l.Farm.Agent.EM
}

// TestFarmEMDrain: `sluice farm drain farm-e` while the EM-only farm-e
// leads mid-run. It publishes its last ledger, resigns, says bye and
// exits 0 with its ledger balanced; another candidate is elected and the
// run goes on as after a kill (checkTakeover).
func TestFarmEMDrain(t *testing.T) {
	ff, e, epoch0 := emFarm(t, 6718931)
	runOK(t, append([]string{"farm", "drain", "farm-e"}, ff.args...)...)
	if code := e.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("farm-e: exit %d after draining\n%s", code, e.log())
	}
	delete(ff.procs, "farm-e") // ended as asked
	for _, want := range []string{"handing over", "resigned as event manager", "drained; leaving"} {
		if !strings.Contains(e.log(), want) {
			t.Fatalf("farm-e did not say %q:\n%s", want, e.log())
		}
	}
	if l := readLedger(t, ff.sums["farm-e"]); !l.Balanced {
		t.Fatalf("farm-e ledger: %+v", l)
	}
	checkTakeover(t, ff, epoch0)
}
