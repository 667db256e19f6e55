package node

import "testing"

func TestRunControlForwardOnly(t *testing.T) {
	var seen []State
	rc := newRunControl(func(s State) { seen = append(seen, s) })
	if err := rc.advance(StateRunning); err == nil {
		t.Fatal("idle -> running skipped configured")
	}
	for _, s := range []State{StateConfigured, StateRunning, StateDraining, StateStopped} {
		if err := rc.advance(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := rc.advance(StateStopped); err == nil {
		t.Fatal("stopped -> stopped allowed")
	}
	if len(seen) != 4 || rc.State() != StateStopped || rc.State().String() != "stopped" {
		t.Fatalf("transitions %v, state %v", seen, rc.State())
	}
	// A failed start goes straight to stopped.
	rc = newRunControl(nil)
	if err := rc.advance(StateStopped); err != nil {
		t.Fatal(err)
	}
}

func TestDrainRequestedOnce(t *testing.T) {
	rc := newRunControl(nil)
	if !rc.requestDrain() || rc.requestDrain() {
		t.Fatal("first request must report true, later ones false")
	}
	select {
	case <-rc.draining():
	default:
		t.Fatal("draining channel not closed")
	}
}
