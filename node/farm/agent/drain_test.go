package agent

import (
	"context"
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
	f, old := emTakeoverFarm(t)
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
	s := f.finishTakeover(old)
	const events = takeoverEvents
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
