package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFarmRUKill: SIGKILL a folded node (RU and BU; not the EM, not the RU
// naming the events) mid-run. The other BUs stop waiting for its sources
// at once: every event is built (the later ones incomplete, without the
// dead RU's sources) well before the builder's 30 s timeout, no
// assignment is given up, and each BU's ledger counts the fragments lost
// by the dead RU's sources with the event ids. Run control masks the dead
// node, and the farm-wide stop completes with it dead: the survivors exit
// 0, their ledgers and the farm ledger balanced.
func TestFarmRUKill(t *testing.T) {
	const loop, rate = 30, 100 // 300 events over 3 s
	f := newFarmRun(t, 6719001, loop, rate)
	want := uint64(loop * 10)
	for _, n := range farmNodes {
		f.start(n)
	}
	st := f.waitFor("50 events built", 40*time.Second, farmNodes, func(st memberStatus) bool {
		return st.EM != nil && st.Ledger != nil && st.Ledger.Built >= 50
	})
	victim := "farm-c"
	if st.EM.Node == victim {
		victim = "farm-b"
	}
	var live []string
	for _, n := range farmNodes {
		if n != victim {
			live = append(live, n)
		}
	}
	if err := f.procs[victim].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-f.procs[victim].done
	st = f.waitFor("every event built after the kill", 25*time.Second, live, func(st memberStatus) bool { return built(st, want) })
	took := time.Since(killed)
	if took >= 20*time.Second {
		t.Fatalf("the events took %v after the kill: they waited for the builder's timeout", took)
	}
	out := runOK(t, append([]string{"farm", "mask", "--node", victim}, f.farmArgs...)...)
	if !strings.Contains(out, victim) {
		t.Fatalf("farm mask: %s", out)
	}
	if out := runOK(t, append([]string{"farm", "status"}, f.farmArgs...)...); !strings.Contains(out, "masked for the rest of the run") ||
		!strings.Contains(out, farmSources(t, f.files[victim])) {
		t.Fatalf("farm status does not show the mask of %s:\n%s", victim, out)
	}
	f.stop(live)
	l := f.status().Ledger
	if !l.Balanced || l.Built != want || l.LostTotal() != 0 {
		t.Fatalf("farm ledger after the kill: %s", l)
	}
	victimSources := farmSources(t, f.files[victim])
	var missingEvents, incomplete, exact uint64
	for _, n := range live {
		nl := readLedger(t, f.sums[n])
		if !nl.Balanced || nl.Farm == nil || nl.Farm.GivenUp != 0 {
			t.Fatalf("%s ledger: %+v (farm %+v)", n, nl, nl.Farm)
		}
		incomplete += nl.EventsIncomplete
		for _, m := range nl.Farm.Missing {
			// Each lacks the dead RU's sources (a loaded machine may make a
			// live RU's wait give up too: then more are missing).
			if !containsAll(splitSources(t, m.Sources), splitSources(t, victimSources)) {
				t.Fatalf("%s: built without sources %s, not all of the dead %s's (%s)", n, m.Sources, victim, victimSources)
			}
			if m.Sources == victimSources {
				exact++
			}
			if len(m.IDs) == 0 || m.Events == 0 || m.Fragments != m.Events*uint64(len(splitSources(t, m.Sources))) {
				t.Fatalf("%s: missing %+v", n, m)
			}
			missingEvents += m.Events
		}
	}
	if missingEvents == 0 || incomplete == 0 || incomplete > missingEvents || exact == 0 {
		t.Fatalf("events built without %s's sources: %d counted missing, %d incomplete", victim, missingEvents, incomplete)
	}
	t.Logf("%s killed after %d events built; the rest built %v later; %d events built without its sources (%d incomplete); %s",
		victim, 50, took.Round(time.Millisecond), missingEvents, incomplete, l)
}

func containsAll(have, want []uint32) bool {
	set := map[uint32]bool{}
	for _, s := range have {
		set[s] = true
	}
	for _, s := range want {
		if !set[s] {
			return false
		}
	}
	return true
}
