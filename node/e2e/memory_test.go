package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node"
)

// memCgroup is a memory cgroup made for one test: v2 (memory.max) or v1
// (memory.limit_in_bytes), whichever controls memory on this machine.
type memCgroup struct {
	dir   string
	v2    bool
	limit uint64 // bytes; 0: none
}

// newMemCgroup makes a child of this process's memory cgroup limited to
// limit bytes (swap included where the kernel accounts it; 0: no limit,
// a new cgroup's default), removed at the end of the test. Not root: the
// test is skipped; root: any failure to set the limit fails it.
func newMemCgroup(t *testing.T, limit uint64) *memCgroup {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the memory cgroup test needs root (to make a cgroup and set its memory limit)")
	}
	parent, v2, err := memoryCgroupDir()
	if err != nil {
		t.Fatalf("memory cgroup: %v", err)
	}
	cg := &memCgroup{dir: filepath.Join(parent, fmt.Sprintf("sluice-test-%d-%d", os.Getpid(), time.Now().UnixNano())), v2: v2, limit: limit}
	if err := os.Mkdir(cg.dir, 0o755); err != nil {
		t.Fatalf("memory cgroup: %v", err)
	}
	t.Cleanup(func() {
		// The processes have ended; rmdir needs the cgroup empty.
		for i := 0; i < 50; i++ {
			if err := os.Remove(cg.dir); err == nil || errors.Is(err, os.ErrNotExist) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("memory cgroup %s could not be removed", cg.dir)
	})
	if limit == 0 {
		return cg
	}
	lim := strconv.FormatUint(limit, 10)
	if v2 {
		cg.write(t, "memory.max", lim)
		cg.write(t, "memory.swap.max", "0")
	} else {
		cg.write(t, "memory.limit_in_bytes", lim)
		if _, err := os.Stat(filepath.Join(cg.dir, "memory.memsw.limit_in_bytes")); err == nil {
			cg.write(t, "memory.memsw.limit_in_bytes", lim)
		}
	}
	got := strings.TrimSpace(cg.read(t, map[bool]string{true: "memory.max", false: "memory.limit_in_bytes"}[v2]))
	// v1 rounds the limit down to a page.
	if g, err := strconv.ParseUint(got, 10, 64); err != nil || g > limit || g < limit-4096 {
		t.Fatalf("memory cgroup %s: limit reads %q, want %d", cg.dir, got, limit)
	}
	return cg
}

// memoryCgroupDir is this process's memory cgroup directory and whether it
// is cgroup v2.
func memoryCgroupDir() (string, bool, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", false, err
	}
	var v2path string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2path = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				for _, root := range []string{"/sys/fs/cgroup/memory", "/sys/fs/cgroup/memory,cpuset"} {
					if d := filepath.Join(root, parts[2]); isDir(d) {
						return d, false, nil
					}
				}
				return "", false, fmt.Errorf("memory cgroup v1 %s not found under /sys/fs/cgroup/memory", parts[2])
			}
		}
	}
	// cgroup v2: the unified hierarchy must offer the memory controller.
	for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		ctl, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
		if err == nil && bytes.Contains(append([]byte(" "), ctl...), []byte(" memory")) {
			d := filepath.Join(root, v2path)
			// A process may not sit in an inner cgroup with children that
			// have controllers: make our children under a leaf of our own
			// parent is not possible without moving; use d itself if its
			// subtree offers memory.
			sub, _ := os.ReadFile(filepath.Join(d, "cgroup.subtree_control"))
			if !bytes.Contains(sub, []byte("memory")) {
				if err := os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte("+memory"), 0); err != nil {
					return "", true, fmt.Errorf("cgroup v2 %s: enabling the memory controller for children: %w", d, err)
				}
			}
			return d, true, nil
		}
	}
	return "", false, errors.New("no memory controller: neither cgroup v1 memory nor v2 with memory is mounted")
}

func isDir(p string) bool { st, err := os.Stat(p); return err == nil && st.IsDir() }

func (cg *memCgroup) write(t *testing.T, file, v string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(cg.dir, file), []byte(v), 0); err != nil {
		t.Fatalf("memory cgroup: %s = %s: %v", file, v, err)
	}
}

func (cg *memCgroup) read(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cg.dir, file))
	if err != nil {
		t.Fatalf("memory cgroup: %v", err)
	}
	return string(b)
}

// ooms is the number of processes the kernel's OOM killer ended in the
// cgroup.
func (cg *memCgroup) ooms(t *testing.T) uint64 {
	file, key := "memory.oom_control", "oom_kill"
	if cg.v2 {
		file = "memory.events"
	}
	sc := bufio.NewScanner(strings.NewReader(cg.read(t, file)))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == key {
			n, _ := strconv.ParseUint(f[1], 10, 64)
			return n
		}
	}
	t.Fatalf("memory cgroup: no %s in %s", key, file)
	return 0
}

// peak is the cgroup's peak charge (v2 memory.peak needs Linux 5.19).
func (cg *memCgroup) peak(t *testing.T) string {
	file := "memory.max_usage_in_bytes"
	if cg.v2 {
		file = "memory.peak"
	}
	b, err := os.ReadFile(filepath.Join(cg.dir, file))
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// TestDemoWithinMemoryBudget runs the demo (shortened) and its replay
// inside a memory cgroup limited to node.memory_budget + 10 %, plugin
// processes included, a fresh cgroup per command: nothing is OOM-killed,
// both ledgers balance and each command's peak is reported
// (TestDemoMemoryLimitThroughput compares the run's throughput under that
// limit with the same run's without it).
func TestDemoWithinMemoryBudget(t *testing.T) {
	file := budgetDemoConfig(t)
	for _, cmd := range []string{"run", "replay"} {
		// A cgroup of its own per command: its peak is that command's
		// alone (a shared one reported the run's peak for the replay too).
		cg := newMemCgroup(t, demoLimit)
		l := cg.sluice(t, cmd, "--config", file)
		if cmd == "run" && l.EventsStored == 0 {
			t.Fatalf("sluice run stored nothing: %s", l.String())
		}
		peak := cg.peak(t)
		if p, err := strconv.ParseUint(peak, 10, 64); err != nil || p == 0 || p > demoLimit {
			t.Fatalf("sluice %s: cgroup peak %q bytes, want one reported within the limit %d", cmd, peak, demoLimit)
		}
		t.Logf("sluice %s: cgroup peak %s bytes (limit %d)", cmd, peak, demoLimit)
	}
}

// demoBudget is the demo's own node.memory_budget, and demoLimit the
// memory cgroup limit its run and replay must hold: the budget + 10 %.
const (
	demoBudget = 512 << 20
	demoLimit  = demoBudget + demoBudget/10
)

// budgetDemoConfig is the demo config (shortened: ~0.6 GB through the
// node) with its own memory budget and ring, on a store of its own.
func budgetDemoConfig(t *testing.T) string {
	t.Helper()
	file, _ := demoConfig(t, "300")
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// demoConfig lowers the budget for the other demo tests; these run
	// the demo's own.
	if !bytes.Contains(text, []byte("memory_budget: 320MiB")) {
		t.Fatal("demo config without its memory budget")
	}
	text = bytes.Replace(text, []byte("memory_budget: 320MiB"), []byte(fmt.Sprintf("memory_budget: %dMiB", demoBudget>>20)), 1)
	text = bytes.Replace(text, []byte("ring_size: 32MiB"), []byte("ring_size: 64MiB"), 1)
	if err := os.WriteFile(file, text, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestDemoMemoryLimitThroughput runs the demo (shortened) under the
// memory cgroup limit of TestDemoWithinMemoryBudget and without one, in
// pairs, each on a store of its own: the median of the pairs' ratios of
// events/s must be at least 0.9.
//
// Paired, because the machine is shared: CI's run of the unit tests,
// other packages beside this one, once measured 1546 events/s at best
// of four runs under the limit and 2415 at best of four without it (0.64)
// where alone the same runs gave 0.86 to 1.27; a maximum of each side
// compares one side's quietest moment with the other's. The baseline
// runs in a memory cgroup of its own with no limit, so the limit is the
// pair's one difference. `make memory` runs it, with no other test
// package beside it.
func TestDemoMemoryLimitThroughput(t *testing.T) {
	if raceDetector || testing.Short() {
		t.Skip("compares throughput: make memory runs it without other test packages beside it")
	}
	limited, free := budgetDemoConfig(t), budgetDemoConfig(t)
	var ratios []float64
	median := func() float64 {
		s := append([]float64(nil), ratios...)
		sort.Float64s(s)
		return (s[(len(s)-1)/2] + s[len(s)/2]) / 2
	}
	// Three pairs, up to seven while the median falls short; the pairs
	// alternate which side runs first, so a trend in the machine's load
	// does not favour one side.
	for i := 0; i < 7 && (i < 3 || median() < 0.9); i++ {
		args := func(file string) []string {
			a := []string{"run", "--config", file}
			if i > 0 {
				a = append(a, "--rerun")
			}
			return a
		}
		var withLimit, without float64
		runWithout := func() { without = runRate(newMemCgroup(t, 0).sluice(t, args(free)...)) }
		runLimited := func() { withLimit = runRate(newMemCgroup(t, demoLimit).sluice(t, args(limited)...)) }
		if i%2 == 0 {
			runWithout()
			runLimited()
		} else {
			runLimited()
			runWithout()
		}
		if without == 0 {
			t.Fatal("the run without a limit reported no flow time")
		}
		ratios = append(ratios, withLimit/without)
		t.Logf("pair %d: %.0f events/s under the limit, %.0f without: ratio %.2f", i+1, withLimit, without, withLimit/without)
	}
	if m := median(); m < 0.9 {
		t.Fatalf("under budget + 10 %%: the median ratio of events/s to the unconstrained run's is %.2f over %d pairs, want >= 0.9", m, len(ratios))
	}
}

// sluice runs the sluice command args (with --summary-json added) inside
// the cgroup and returns its ledger; an OOM kill, a failed command or a
// ledger that does not balance fails the test.
func (cg *memCgroup) sluice(t *testing.T, args ...string) node.Ledger {
	t.Helper()
	summary := filepath.Join(t.TempDir(), "summary.json")
	// The shell enters the cgroup and then becomes sluice, so every byte
	// sluice and its plugins touch is charged there.
	c := exec.Command("/bin/sh", append([]string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, cg.dir,
		filepath.Join(bin, "sluice")}, append(args, "--summary-json", summary)...)...)
	c.Dir = repo
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	if n := cg.ooms(t); n > 0 {
		t.Fatalf("sluice %s: %d process(es) OOM-killed under %d bytes (peak %s)\n%s", args[0], n, cg.limit, cg.peak(t), tail(out.String(), 30))
	}
	if err != nil {
		t.Fatalf("sluice %s: %v\n%s", strings.Join(args, " "), err, tail(out.String(), 30))
	}
	l := readLedger(t, summary)
	if !l.Balanced {
		t.Fatalf("sluice %s: ledger does not balance: %s", args[0], l.String())
	}
	return l
}

// runRate is a run's events built per second of its data's flow (first
// fragment to last batch stored: the ledger's flow_seconds), the rate
// sluice bench reports; the shutdown after it (the store's close, which
// under the limit also waits for the page cache's reclaim) is not the
// node's throughput.
func runRate(l node.Ledger) float64 {
	if l.FlowSeconds > 0 {
		return float64(l.EventsBuilt) / l.FlowSeconds
	}
	return 0
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestDemoMemoryAtMinimum runs the demo (its own 64MiB ring, and an 8MiB
// one; shortened) and its replay at the least node.memory_budget they
// accept, found by bisection over `config validate` (the parts' shares:
// here the inputs' 15 % must hold the ring) and the refusal `run` gives
// below the fixed memory's minimum: the run's peak resident memory
// (VmHWM) must be within that budget + 64MiB, the replay's within the
// budget, and each ledger balance. Before the ring its
// emulator maps a second time in the node's process was counted (outside
// the Go heap's limit and in the minimum), the run peaked at the budget +
// 34 to 67MiB in three runs (+3 to 18 after). `make memory` runs it.
func TestDemoMemoryAtMinimum(t *testing.T) {
	if raceDetector || testing.Short() {
		t.Skip("measures resident memory: make memory runs it without the race detector")
	}
	// A 64MiB ring, and an 8MiB one: its least budget is lower, where
	// the replay's per-batch memory weighs most (a replay of 256-event
	// batches took its VmHWM to the budget + 80MiB at 229MiB).
	for _, ring := range []string{"64MiB", "8MiB"} {
		t.Run("ring="+ring, func(t *testing.T) { demoMemoryAtMinimum(t, ring) })
	}
}

// demoMemoryAtMinimum runs the demo config with the given ring size at
// its least budget, then replays it there.
func demoMemoryAtMinimum(t *testing.T, ring string) {
	file, _ := demoConfig(t, "300") // 3000 events, ~0.6 GB through the node
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text = bytes.Replace(text, []byte("ring_size: 32MiB"), []byte("ring_size: "+ring), 1)
	withBudget := func(mib int) string {
		b := bytes.Replace(text, []byte("memory_budget: 320MiB"), []byte(fmt.Sprintf("memory_budget: %dMiB", mib)), 1)
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return file
	}
	if !bytes.Contains(text, []byte("memory_budget: 320MiB")) || !bytes.Contains(text, []byte("ring_size: "+ring)) {
		t.Fatal("demo config without its memory budget or ring size")
	}
	// The least budget validation accepts: refused at lo, accepted at hi.
	lo, hi := 64, 1024
	valid := func(mib int) bool {
		return exec.Command(filepath.Join(bin, "sluice"), "config", "validate", withBudget(mib)).Run() == nil
	}
	if valid(lo) || !valid(hi) {
		t.Fatalf("config validate: want %dMiB refused and %dMiB accepted", lo, hi)
	}
	for hi-lo > 1 {
		if m := (lo + hi) / 2; valid(m) {
			hi = m
		} else {
			lo = m
		}
	}
	budget := hi
	for _, cmd := range []string{"run", "replay"} {
		summary := filepath.Join(t.TempDir(), cmd+".json")
		p := start(t, cmd, "--config", withBudget(budget), "--summary-json", summary)
		code := p.wait(t, 2*time.Minute)
		if m := regexp.MustCompile(`want at least (\d+)MiB`).FindStringSubmatch(p.log()); cmd == "run" && code != 0 && m != nil {
			// Below the fixed memory's minimum: run there instead.
			n, _ := strconv.Atoi(m[1])
			if n <= budget {
				t.Fatalf("sluice run refused %dMiB wanting at least %dMiB", budget, n)
			}
			budget = n
			p = start(t, cmd, "--config", withBudget(budget), "--summary-json", summary)
			code = p.wait(t, 2*time.Minute)
		}
		if code != 0 {
			t.Fatalf("sluice %s at %dMiB: exit %d\n%s", cmd, budget, code, tail(p.log(), 30))
		}
		l := readLedger(t, summary)
		if !l.Balanced || l.Memory == nil || l.Memory.PeakResidentBytes == 0 {
			t.Fatalf("sluice %s at %dMiB: balanced %v, memory %+v", cmd, budget, l.Balanced, l.Memory)
		}
		if cmd == "run" && l.EventsStored == 0 {
			t.Fatalf("sluice run at %dMiB stored nothing: %s", budget, l.String())
		}
		peak := l.Memory.PeakResidentBytes
		t.Logf("sluice %s at its least budget %dMiB: VmHWM %d MiB (budget %+d MiB)", cmd, budget, peak>>20, int(peak>>20)-budget)
		// A replay has no rings nor builder: it peaks within the budget
		// itself (at 229MiB with an 8MiB ring, 256-event batches of
		// ~200 kB events took it to +40MiB, bounded by the heap's share
		// -118MiB).
		if slack := map[string]uint64{"run": 64 << 20}[cmd]; peak > uint64(budget)<<20+slack {
			t.Errorf("sluice %s at its least budget %dMiB: VmHWM %d MiB, want within the budget + %dMiB", cmd, budget, peak>>20, slack>>20)
		}
	}
}
