package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFarmFoldedStop: SIGSTOP a folded node (RU and BU; not the EM, not
// the RU naming the events) for longer than the peer timeout, then
// SIGCONT it. The EM fences it; continued, it finds its RU fenced and its
// run ends. The other two go on and build every remaining event (without
// its sources), and end balanced with exit 0 after `farm stop`.
//
// The other survivor (farm-b) loses its link to the stopped node before
// the EM does (a shorter peer timeout), and its readout runs behind (half
// the rate), so it sends data of the stopped BU's assignments after the
// loss. That data stayed queued for ever on a link made again after the
// loss, pinning farm-b's packets: its small ring (acknowledged in ring
// order) filled behind them and its readout never ended (make farm at
// load 28: the pinned ring was the trigger source's, and the farm stalled
// with every announced event built).
func TestFarmFoldedStop(t *testing.T) {
	const loop, rate, slow = 50, 100, 50 // 500 events, farm-b's over 10 s
	f := newFarmRun(t, 6719021, loop, rate)
	want := uint64(loop * 10)
	editFile(t, f.files["farm-b"], [2]string{`ring_size: 32MiB`, "ring_size: 4MiB"}, // ~130 of its events
		[2]string{`rate: 100\b`, fmt.Sprintf("rate: %d", slow)},
		[2]string{`em_candidate: true`, "em_candidate: false"}, [2]string{`peer_timeout: 3s`, "peer_timeout: 1500ms"})
	editFile(t, f.files["farm-c"], [2]string{`em_candidate: true`, "em_candidate: false"})
	for _, n := range farmNodes {
		f.start(n)
	}
	f.waitFor("60 events built", 40*time.Second, farmNodes, func(st memberStatus) bool {
		return st.EM != nil && st.Ledger != nil && st.Ledger.Built >= 60
	})
	live := []string{"farm-a", "farm-b"}
	victim := f.procs["farm-c"]
	if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			_ = victim.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	f.waitFor("farm-c fenced", 30*time.Second, live, func(st memberStatus) bool {
		for _, m := range st.Members {
			if m.Node == "farm-c" {
				return false
			}
		}
		return true
	})
	if err := victim.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	if code := victim.wait(t, 30*time.Second); code == 0 {
		t.Fatalf("farm-c: exit 0 after its RU was fenced\n%s", victim.log())
	}
	f.waitFor("every event built after farm-c was fenced", 60*time.Second, live, func(st memberStatus) bool { return built(st, want) })
	// farm-b's readout must end: its ring must not be held by data for
	// the fenced BU (the events would still be built, without its data,
	// once its RU gave up waiting for its sources).
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(f.procs["farm-b"].log(), "every input ended") {
		if time.Now().After(deadline) {
			t.Fatalf("farm-b's readout did not end within 60 s (its ring held):\n%s", f.procs["farm-b"].log())
		}
		time.Sleep(200 * time.Millisecond)
	}
	f.stop(live)
	l := f.status().Ledger
	if !l.Balanced || l.Built != want || l.LostTotal() != 0 {
		t.Fatalf("farm ledger after farm-c was fenced: %s", l)
	}
	for _, n := range live {
		if nl := readLedger(t, f.sums[n]); !nl.Balanced || nl.Farm == nil || nl.Farm.GivenUp != 0 {
			t.Fatalf("%s ledger: %+v (farm %+v)", n, nl, nl.Farm)
		}
	}
	t.Logf("farm-c stopped and fenced; %s", l)
}
