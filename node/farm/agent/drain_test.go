package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/farm"
)

// TestAgentEMDrain: the EM (an EM-only node) is asked to drain mid-run
// while a BU holds work. It publishes its last ledger, resigns and leaves
// (Drained); a folded node is elected with a higher epoch, takes over
// from the inventories and the ledger it inherited, and the run goes on:
// every event built exactly once, the new EM's ledger spans the run with
// nothing lost, every packet freed.
func TestAgentEMDrain(t *testing.T) {
	f := newTestFarm(t, "push")
	f.start("a", farm.RoleEM, nil)
	f.waitFor("a to win the election", 10*time.Second, func() bool { return f.agents["a"].Status().Leader == "a" })
	all := farm.RoleRU | farm.RoleBU | farm.RoleEM
	f.start("b", all, []uint32{0, 1, 2})
	f.start("c", all, []uint32{3, 4})
	f.readyBUs(3, 2)
	f.mu.Lock()
	f.checks["c"].hold = true // c's decisions wait: it holds work at the handover
	f.mu.Unlock()
	const events = 400
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); f.readout("b", []uint32{0, 1, 2}, 0, events/2) }()
	go func() { defer wg.Done(); f.readout("c", []uint32{3, 4}, 0, events/2) }()
	wg.Wait()
	f.waitFor("settled work and work in flight", 10*time.Second, func() bool {
		s := f.agents["a"].Status()
		c := f.agents["c"].Status()
		return s.EM != nil && s.EM.Settled >= 10 && c.BU != nil && c.BU.InFlight >= 3
	}, f.dump)
	old := f.agents["a"].Status()
	if _, err := f.client().Drain(context.Background(), "a", "test"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-f.agents["a"].Drained():
	case <-time.After(20 * time.Second):
		f.dump()
		t.Fatal("the draining EM did not hand over and leave within 20 s")
	}
	if s := f.agents["a"].Status(); s.EM != nil {
		t.Fatalf("a drained still leading: %+v", s.EM)
	}
	f.stop("a") // the node leaves (its lease goes)
	delete(f.agents, "a")
	f.waitFor("a new EM", 10*time.Second, func() bool {
		s, ok := f.leaderStatus()
		return ok && !s.EM.Reconciling && s.Epoch > old.Epoch
	}, f.dump)
	f.checks["c"].unhold()
	wg.Add(2)
	go func() { defer wg.Done(); f.readout("b", []uint32{0, 1, 2}, events/2, events) }()
	go func() { defer wg.Done(); f.readout("c", []uint32{3, 4}, events/2, events) }()
	wg.Wait()
	for _, n := range []string{"b", "c"} {
		f.agents[n].EndOfData(context.Background())
	}
	f.waitFor("every event built", 20*time.Second, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for id := uint64(0); id < events; id++ {
			if len(f.built[id]) == 0 {
				return false
			}
		}
		s, ok := f.leaderStatus()
		return ok && s.Ledger.Balanced
	}, f.dump)
	f.waitFor("every packet freed", 5*time.Second, func() bool { return f.freed.Load() == events/4*nSources }, f.dump)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bad) > 0 {
		t.Fatalf("%d problems, first: %v", len(f.bad), f.bad[:min(5, len(f.bad))])
	}
	for id := uint64(0); id < events; id++ {
		if len(f.built[id]) != 1 {
			t.Fatalf("event %d built by %v", id, f.built[id])
		}
	}
	s, _ := f.leaderStatus()
	if s.EM.Adopted == 0 {
		t.Fatalf("the new EM adopted nothing: the test did not hand over work in flight")
	}
	if l := s.Ledger; !l.Balanced || l.Announced != events || l.Built != events || l.LostTotal() != 0 || l.Duplicate != 0 {
		t.Fatalf("the new EM's ledger does not span the run: %s", l)
	}
	t.Logf("drained EM %s (epoch %d) had made %d assignments, %d settled; new EM %s (epoch %d): adopted %d, carried over %d; %s",
		old.Node, old.Epoch, old.EM.Assigned, old.EM.Settled, s.Node, s.Epoch, s.EM.Adopted, s.EM.AdoptedSettled, s.Ledger)
}

// TestAgentEMDrainAlone: an EM with no other EM candidate in the farm,
// asked to drain, stays: leaving would leave the farm without one. It
// leads on (the run goes on) and does not say it drained.
func TestAgentEMDrainAlone(t *testing.T) {
	f := newTestFarm(t, "push")
	f.start("a", farm.RoleEM, nil)
	f.waitFor("a to win the election", 10*time.Second, func() bool { return f.agents["a"].Status().Leader == "a" })
	f.start("b", farm.RoleRU|farm.RoleBU, []uint32{0, 1, 2, 3, 4})
	f.readyBUs(2, 1)
	if _, err := f.client().Drain(context.Background(), "a", "test"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-f.agents["a"].Drained():
		t.Fatal("the only EM candidate drained and left")
	case <-time.After(time.Second):
	}
	f.readout("b", []uint32{0, 1, 2, 3, 4}, 0, 40)
	f.agents["b"].EndOfData(context.Background())
	f.waitFor("every event built by the EM that stayed", 10*time.Second, func() bool {
		s := f.agents["a"].Status()
		return s.EM != nil && s.Ledger.Balanced && s.Ledger.Built == 40
	}, f.dump)
}
