package plugins

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-daq/sluice/schemas"
)

// TestKillDuringRun SIGKILLs l0calo processes 20 times while 100 000 small
// events go through two instances from two feeders: every event gets
// exactly one final decision, and the accepted events are those of a run
// without kills.
func TestKillDuringRun(t *testing.T) {
	const events, perBatch, kills = 100_000, 250, 20
	mem := checkedMem(t)
	batches := synthetic(t, mem, 1, events, perBatch, 16) // 10 payloads of one record: 160 B per event
	want := inProcessL0(t, batches)

	reg := prometheus.NewRegistry()
	log, logs := testLogger()
	c, err := NewChain(context.Background(), Config{Stages: []StageConfig{{
		Name: "llt", Plugin: pluginPath("l0calo"), Instances: 2, RestartBackoff: 10 * time.Millisecond,
	}}, Options: Options{Allocator: mem, Logger: log}, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	var next, finished atomic.Int64
	results := make([][]schemas.Verdict, len(batches))
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				b := int(next.Add(1) - 1)
				if b >= len(batches) {
					return
				}
				res, err := decideRec(context.Background(), c, batches[b])
				if err != nil {
					t.Error(err)
					return
				}
				results[b] = res
				finished.Add(1)
			}
		})
	}
	// Kill at fixed points of progress, spread over the first half of the
	// run so that restarts (~0.1 s each) keep up and each killed instance is
	// used again.
	killed := map[int64]bool{}
	s := c.stages[0]
	for k := 0; k < kills; k++ {
		at := int64((k + 1) * len(batches) / 2 / (kills + 1))
		var pid int64
		for finished.Load() < at || pid == 0 || killed[pid] {
			if finished.Load() == int64(len(batches)) {
				t.Fatalf("the run ended before kill %d", k+1)
			}
			// Whichever slot runs a process not killed yet; 0 while restarting.
			if pid = s.slots[k%2].pid.Load(); pid == 0 || killed[pid] {
				pid = s.slots[1-k%2].pid.Load()
			}
			time.Sleep(time.Millisecond)
		}
		if err := syscall.Kill(int(pid), syscall.SIGKILL); err != nil {
			t.Fatalf("kill %d: %v", pid, err)
		}
		killed[pid] = true
	}
	wg.Wait()

	got := map[uint64]schemas.Verdict{}
	for b, res := range results {
		collect(t, got, batches[b], res)
	}
	if len(got) != events {
		t.Fatalf("%d of %d events decided", len(got), events)
	}
	accepted := 0
	for id, r := range got {
		if r.Status&schemas.StatusTriggerError != 0 || (r.Decision == schemas.DecisionAccept) != (want[id].Decision == schemas.DecisionAccept) || r.Lines != want[id].Lines {
			t.Fatalf("event %d: %+v, run without kills: %+v", id, r, want[id])
		}
		if r.Decision == schemas.DecisionAccept {
			accepted++
		}
	}
	if n := metricValue(t, reg, "sluice_trigger_restarts_total", "stage", "llt", "reason", "crash"); n != kills {
		t.Fatalf("%v restarts counted after %d kills", n, kills)
	}
	if n := metricValue(t, reg, "sluice_trigger_instances_up", "stage", "llt"); n != 2 {
		t.Fatalf("%v instances up at the end", n)
	}
	// The chain's own state says the same as its metrics.
	if st := c.State()[0]; st.Restarts != uint64(kills) || st.Up != 2 || st.Failures < uint64(kills) {
		t.Fatalf("state %+v after %d kills", st, kills)
	}
	if !strings.Contains(logs.String(), "trigger plugin restarted") {
		t.Fatal("restarts not logged")
	}
	t.Logf("%d events, %d accepted, %d kills, all restarted", events, accepted, kills)
}

// TestPanicOnEvent: the plugin panics on event 1234; its batch is deferred
// with StatusTriggerError and the reason, the other batches are decided, and
// the panic reaches the node's log under the plugin's name.
func TestPanicOnEvent(t *testing.T) {
	for _, mode := range []string{"panic", "exit"} {
		t.Run(mode, func(t *testing.T) {
			mem := checkedMem(t)
			batches := synthetic(t, mem, 1000, 1000, 100, 16)
			reg := prometheus.NewRegistry()
			log, logs := testLogger()
			c, err := NewChain(context.Background(), Config{Stages: []StageConfig{{
				Name: "hlt", Plugin: pluginPath("panicky"), Params: map[string]string{"event": "1234", "mode": mode},
				MaxAttempts: 3, RestartBackoff: 10 * time.Millisecond,
			}}, Options: Options{Allocator: mem, Logger: log}, Registerer: reg})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			got := runChain(t, c, batches)
			for id, r := range got {
				bad := id >= 1200 && id < 1300 // the batch holding 1234
				switch {
				case bad && (r.Decision != schemas.DecisionDefer || r.Status&schemas.StatusTriggerError == 0 || r.Reason.Kind != schemas.ReasonTriggerError || !strings.Contains(r.Reason.Text, "failed 3 times")):
					t.Fatalf("event %d of the failing batch: %+v", id, r)
				case !bad && (r.Decision != schemas.DecisionAccept || r.Status != 0):
					t.Fatalf("event %d: %+v", id, r)
				}
			}
			if n := metricValue(t, reg, "sluice_trigger_batches_total", "outcome", "trigger_error"); n != 1 {
				t.Fatalf("%v failed batches counted", n)
			}
			l := logs.String()
			switch mode {
			case "panic":
				if !strings.Contains(got[1234].Reason.Text, "panicked") || !strings.Contains(l, "trigger panicked") || !strings.Contains(l, "plugin=panicky") {
					t.Fatalf("reason %q; log:\n%s", got[1234].Reason.Text, l)
				}
			case "exit":
				if n := metricValue(t, reg, "sluice_trigger_restarts_total", "reason", "crash"); n != 3 {
					t.Fatalf("%v restarts, want 3", n)
				}
				if !strings.Contains(l, "msg=\"exiting on event\"") || !strings.Contains(l, "event=1234") {
					t.Fatalf("plugin's stderr not in the log:\n%s", l)
				}
			}
		})
	}
}

// TestHang: the plugin hangs; the deadline fires, the process is killed and
// restarted, and the batch is resent (once=FILE: the new process decides
// it). A plugin that hangs every time has its batch deferred.
func TestHang(t *testing.T) {
	mem := checkedMem(t)
	batches := synthetic(t, mem, 0, 60, 20, 16)
	for _, once := range []bool{true, false} {
		params := map[string]string{"event": "25"}
		if once {
			params["once"] = t.TempDir() + "/hung"
		}
		reg := prometheus.NewRegistry()
		c, err := NewChain(context.Background(), Config{Stages: []StageConfig{{
			Name: "hlt", Plugin: pluginPath("hang"), Params: params, Deadline: 300 * time.Millisecond,
			MaxAttempts: 2, RestartBackoff: 10 * time.Millisecond,
		}}, Options: Options{Allocator: mem}, Registerer: reg})
		if err != nil {
			t.Fatal(err)
		}
		first := c.stages[0].slots[0].pid.Load()
		got := runChain(t, c, batches)
		for id, r := range got {
			failed := !once && id >= 20 && id < 40
			if failed != (r.Decision == schemas.DecisionDefer && r.Status == schemas.StatusTriggerError) || (!failed && r.Decision != schemas.DecisionAccept) {
				t.Fatalf("once=%v event %d: %+v", once, id, r)
			}
		}
		wantRestarts := map[bool]float64{true: 1, false: 2}[once]
		if n := metricValue(t, reg, "sluice_trigger_restarts_total", "reason", "deadline"); n != wantRestarts {
			t.Fatalf("once=%v: %v restarts after deadlines, want %v", once, n, wantRestarts)
		}
		if alive(int(first)) {
			t.Fatalf("hung process %d still alive", first)
		}
		c.Close()
	}
}

// TestHangPipelined: one instance of a plugin built with the SDK takes
// two batches at once (it speaks the pipelined protocol). The first hangs
// (once), so the second, sent behind it, fails with the process when the
// deadline kills it: two failed calls, one restart, and both batches are
// then decided by the new process, every event once. One call at a time,
// the second batch would have waited for the restarted process (one
// failure).
func TestHangPipelined(t *testing.T) {
	arena, err := NewArena(16 << 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { arena.Close() })
	mem := memory.NewCheckedAllocator(arena)
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after synthetic's release
	batches := synthetic(t, mem, 0, 40, 20, 16)
	hung := t.TempDir() + "/hung"
	reg := prometheus.NewRegistry()
	c, err := NewChain(context.Background(), Config{Stages: []StageConfig{{
		Name: "hlt", Plugin: pluginPath("hang"), Params: map[string]string{"event": "5", "once": hung},
		Deadline: time.Second, RestartBackoff: 10 * time.Millisecond,
	}}, Options: Options{Allocator: mem, Arena: arena}, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if d := c.stages[0].depth; d != CallsInFlight {
		t.Fatalf("%d calls in flight per instance, want %d", d, CallsInFlight)
	}
	results := make([][]schemas.Verdict, len(batches))
	var wg sync.WaitGroup
	for b := range batches {
		wg.Go(func() {
			res, err := decideRec(context.Background(), c, batches[b])
			if err != nil {
				t.Error(err)
			}
			results[b] = res
		})
		if b == 0 {
			for { // until the plugin hangs on the first batch (bounded by the test timeout)
				if _, err := os.Stat(hung); err == nil {
					break
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
	wg.Wait()
	got := map[uint64]schemas.Verdict{}
	for b, rec := range batches {
		collect(t, got, rec, results[b])
	}
	for id := range uint64(40) {
		if r, ok := got[id]; !ok || r.Decision != schemas.DecisionAccept {
			t.Fatalf("event %d: %+v (decided %v)", id, r, ok)
		}
	}
	if n := metricValue(t, reg, "sluice_trigger_call_failures_total"); n != 2 {
		t.Errorf("%v failed calls, want 2 (the hung batch and the one behind it)", n)
	}
	if n := metricValue(t, reg, "sluice_trigger_restarts_total"); n != 1 {
		t.Errorf("%v restarts, want 1", n)
	}
}

// TestBadBinaries: a program that is not a plugin, a plugin of another
// protocol version and a missing file each stop the chain at start-up with
// an error naming the binary.
func TestBadBinaries(t *testing.T) {
	for _, c := range []struct{ name, path, says string }{
		// What an ordinary program prints is quoted, as for a plugin that
		// prints before serving: the host cannot tell them apart.
		{"not a plugin", pluginPath("notplugin"), `wrote to standard output before serving; go-plugin uses stdout for its handshake (first bytes: "hello, I am not a plugin\n")`},
		{"wrong protocol", pluginPath("wrongproto"), "another trigger protocol version"},
		{"missing", pluginPath("nosuchplugin"), "no such file"},
	} {
		_, err := NewChain(context.Background(), Config{Stages: []StageConfig{{Name: "hlt", Plugin: c.path}},
			Options: Options{StartTimeout: 5 * time.Second}})
		if err == nil || !strings.Contains(err.Error(), c.path) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: error %v, want it to name %s and say %q", c.name, err, c.path, c.says)
		}
	}
}

// TestNoOrphans SIGKILLs a host process holding two plugins: the plugins
// die with it.
func TestNoOrphans(t *testing.T) {
	host := exec.Command(pluginPath("orphanhost"), pluginPath("passthrough"), pluginPath("l0calo"))
	out, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	host.Stderr = os.Stderr
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		host.Process.Kill()
		t.Fatalf("host: %v", err)
	}
	var pids []int
	for _, f := range strings.Fields(line) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if len(pids) != 2 || !alive(pids[0]) || !alive(pids[1]) {
		t.Fatalf("plugin pids %v not running", pids)
	}
	host.Process.Signal(syscall.SIGKILL)
	host.Wait()
	for _, pid := range pids {
		for alive(pid) { // bounded by the test timeout
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// Field 3, after the parenthesised command name, is the state.
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}
