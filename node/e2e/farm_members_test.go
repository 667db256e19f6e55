package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/farm"
	"github.com/sluice-daq/sluice/schemas"
)

// farmRun is one run of the farm's nodes in a membership test: etcd, the
// run recorded, the nodes' configs, processes and summaries.
type farmRun struct {
	t        *testing.T
	etcd     string
	farmArgs []string
	token    string
	farmID   string
	run      uint32
	files    map[string]string
	procs    map[string]*proc
	sums     map[string]string
}

// newFarmRun starts etcd and records run (push) for configs/farm-*.yaml
// with an accept-everything chain, readouts of loop passes paced at rate
// events/s, and a builder timeout of 30 s (longer than any wait the test
// allows, so an event that waited for it shows).
func newFarmRun(t *testing.T, run uint32, loop, rate int) *farmRun {
	f := &farmRun{t: t, etcd: startEtcd(t), run: run, files: map[string]string{}, procs: map[string]*proc{}, sums: map[string]string{}}
	f.token = filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f.token, []byte("e2e-farm-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.farmID = fmt.Sprintf("e2e-m-%d", os.Getpid())
	f.farmArgs = []string{"--etcd", f.etcd, "--farm", f.farmID}
	for _, n := range farmNodes {
		file, _ := farmConfig(t, n, f.farmID, f.etcd, f.token, fmt.Sprint(loop), true)
		f.files[n] = paced(t, file, rate)
	}
	runOK(t, append([]string{"farm", "start", "--run", fmt.Sprint(run), "--config", f.files["farm-a"], "--protocol", "push"}, f.farmArgs...)...)
	return f
}

var loopLine = regexp.MustCompile(`(?m)^(\s+)loop: ([0-9]+).*$`)

// paced rewrites a node config: the emulator paced at rate events/s, the
// builder's timeout 30 s.
func paced(t *testing.T, file string, rate int) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text := loopLine.ReplaceAllString(string(b), fmt.Sprintf("${1}loop: ${2}\n${1}rate: %d", rate))
	if !strings.Contains(text, "timeout: 10s") {
		t.Fatalf("%s: no builder timeout of 10s", file)
	}
	text = strings.Replace(text, "timeout: 10s", "timeout: 30s", 1)
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func (f *farmRun) start(n string) {
	f.sums[n] = filepath.Join(f.t.TempDir(), n+".run.json")
	f.procs[n] = start(f.t, "run", "--config", f.files[n], "--run", fmt.Sprint(f.run), "--protocol", "push", "--summary-json", f.sums[n])
}

// memberStatus is the part of `sluice farm status --json` these tests read.
type memberStatus struct {
	Members []struct {
		Node string `json:"node"`
	} `json:"members"`
	EM *struct {
		Node string `json:"node"`
	} `json:"em"`
	Ledger *farm.LedgerSummary `json:"ledger"`
}

func (f *farmRun) status() memberStatus {
	out := runOK(f.t, append([]string{"farm", "status", "--json"}, f.farmArgs...)...)
	var st memberStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		f.t.Fatalf("farm status --json: %v\n%s", err, out)
	}
	return st
}

// waitFor polls the farm's status until ok (the processes in live must
// not end meanwhile).
func (f *farmRun) waitFor(what string, limit time.Duration, live []string, ok func(memberStatus) bool) memberStatus {
	f.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		st := f.status()
		if ok(st) {
			return st
		}
		for _, n := range live {
			select {
			case <-f.procs[n].done:
				f.t.Fatalf("%s ended while waiting for %s:\n%s\n%s", n, what, f.procs[n].stdout.String(), f.procs[n].log())
			default:
			}
		}
		if time.Now().After(deadline) {
			for n, p := range f.procs {
				f.t.Logf("%s:\n%s", n, p.log())
			}
			var l string
			if st.Ledger != nil {
				l = st.Ledger.String()
			}
			f.t.Fatalf("no %s within %v: %s", what, limit, l)
		}
		time.Sleep(150 * time.Millisecond)
	}
}

// stop stops the run and checks that the nodes in live exit 0 with
// balanced ledgers; it returns their ledgers' farm parts and events.
func (f *farmRun) stop(live []string) {
	f.t.Helper()
	runOK(f.t, append([]string{"farm", "stop"}, f.farmArgs...)...)
	for _, n := range live {
		if code := f.procs[n].wait(f.t, 30*time.Second); code != 0 {
			f.t.Fatalf("%s: exit %d after farm stop\n%s\n%s", n, code, f.procs[n].stdout.String(), f.procs[n].log())
		}
	}
}

func built(st memberStatus, want uint64) bool {
	l := st.Ledger
	return l != nil && l.Announced == want && l.Built == want && l.Open == 0
}

// TestFarmJoinDrain: a 4th node, a BU only, joins mid-run and takes work;
// asked to drain, it finishes what it holds, says bye and leaves (exit 0,
// its ledger balanced) while the run goes on; nothing is lost: the farm
// ledger balances with every event built once and each BU's count is its
// node's.
func TestFarmJoinDrain(t *testing.T) {
	const loop, rate = 40, 40 // 400 events over ~10 s: farm-d must join while it runs
	f := newFarmRun(t, 6719101, loop, rate)
	want := uint64(loop * 10)
	for _, n := range farmNodes {
		f.start(n)
	}
	f.waitFor("30 events built", 40*time.Second, farmNodes, func(st memberStatus) bool {
		return st.Ledger != nil && st.Ledger.Built >= 30
	})
	f.files["farm-d"] = buOnlyConfig(t, f.files["farm-a"], "farm-d")
	f.start("farm-d")
	all := append(append([]string(nil), farmNodes...), "farm-d")
	st := f.waitFor("farm-d to build", 30*time.Second, all, func(st memberStatus) bool {
		return st.Ledger != nil && st.Ledger.PerBU["farm-d"] >= 20
	})
	if st.Ledger.Built >= want {
		t.Fatalf("the run was over before farm-d drained: %s", st.Ledger)
	}
	runOK(t, append([]string{"farm", "drain", "farm-d"}, f.farmArgs...)...)
	if code := f.procs["farm-d"].wait(t, 30*time.Second); code != 0 {
		t.Fatalf("farm-d: exit %d after draining\n%s", code, f.procs["farm-d"].log())
	}
	d := readLedger(t, f.sums["farm-d"])
	if !d.Balanced || d.Farm == nil || d.Farm.Assignments == 0 || d.Farm.Decided != d.Farm.Assignments || d.Farm.GivenUp != 0 {
		t.Fatalf("farm-d ledger: %+v (farm %+v)", d, d.Farm)
	}
	if !strings.Contains(f.procs["farm-d"].log(), "drained; leaving") {
		t.Fatalf("farm-d did not say it drained:\n%s", f.procs["farm-d"].log())
	}
	// The run was not stopped: the drained node must not say it was.
	if l := f.procs["farm-d"].log(); strings.Contains(l, "farm run stopped") || !strings.Contains(l, "drained out of the run") {
		t.Fatalf("farm-d's log says the run stopped, or not that it was drained out of it:\n%s", l)
	}
	st = f.waitFor("every event built", 40*time.Second, farmNodes, func(st memberStatus) bool { return built(st, want) })
	for _, m := range st.Members {
		if m.Node == "farm-d" {
			t.Fatal("farm-d is still a member after leaving")
		}
	}
	f.stop(farmNodes)
	l := f.status().Ledger
	if !l.Balanced || l.Built != want || l.LostTotal() != 0 || l.Duplicate != 0 {
		t.Fatalf("farm ledger: %s", l)
	}
	var sum uint64
	for _, n := range all {
		nl := readLedger(t, f.sums[n])
		if !nl.Balanced || nl.EventsIncomplete != 0 || l.PerBU[n] != nl.EventsBuilt {
			t.Fatalf("%s: ledger %+v; the farm ledger says it built %d", n, nl, l.PerBU[n])
		}
		sum += nl.EventsBuilt
	}
	if sum != want {
		t.Fatalf("the nodes built %d events, want %d", sum, want)
	}
	t.Logf("farm-d built %d events before it drained; %s", d.EventsBuilt, l)
}

// buOnlyConfig turns a node's config into a BU-only node's: its own id,
// store and HTTP port, no EM candidacy, and for input a TCP listener
// nothing sends to (a BU builds from the RUs' data).
func buOnlyConfig(t *testing.T, from, id string) string {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i, j := strings.Index(text, "\ninputs:\n"), strings.Index(text, "\nsources:\n")
	if i < 0 || j < i {
		t.Fatalf("%s: no inputs section before the sources", from)
	}
	text = text[:i] + "\n" + text[j:] // a BU has no input of its own
	for old, repl := range map[string]string{
		"id: farm-a":         "id: " + id,
		"roles: both":        "roles: bu",
		"em_candidate: true": "em_candidate: false",
	} {
		if !strings.Contains(text, old) {
			t.Fatalf("%s: no %q", from, old)
		}
		text = strings.Replace(text, old, repl, 1)
	}
	store := regexp.MustCompile(`(?m)^  path: .*$`)
	text = store.ReplaceAllString(text, "  path: "+filepath.Join(t.TempDir(), "store"))
	f := filepath.Join(t.TempDir(), id+".yaml")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

var farmSourcesLine = regexp.MustCompile(`(?m)^  sources: "([^"]+)"`)

// farmSources is a node config's farm.sources (its RU's share).
func farmSources(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m := farmSourcesLine.FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no farm.sources", file)
	}
	return schemas.FormatSourceList(splitSources(t, string(m[1])))
}

func splitSources(t *testing.T, list string) []uint32 {
	t.Helper()
	ids, err := schemas.ParseSourceList(list)
	if err != nil {
		t.Fatalf("source list %q: %v", list, err)
	}
	return ids
}

// TestFarmReadoutAhead: one RU's readout reads further than the RU
// holding the trigger source (farm-b 10 passes more than farm-a's): the
// events of its extra packets are never named, so no assignment can hold
// them. farm-a, once its readout ended, tells every RU which events it
// named (the end message); farm-b frees the rest as they come, counted by
// source, and the farm-wide stop completes — before, farm-b held them for
// ever and never exited.
func TestFarmReadoutAhead(t *testing.T) {
	const loop, extra, rate = 20, 10, 100
	f := newFarmRun(t, 6719201, loop, rate)
	b, err := os.ReadFile(f.files["farm-b"])
	if err != nil {
		t.Fatal(err)
	}
	text := loopLine.ReplaceAllString(string(b), fmt.Sprintf("${1}loop: %d", loop+extra))
	if err := os.WriteFile(f.files["farm-b"], []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	want := uint64(loop * 10)
	for _, n := range farmNodes {
		f.start(n)
	}
	f.waitFor("every event built", 60*time.Second, farmNodes, func(st memberStatus) bool { return built(st, want) })
	deadline := time.Now().Add(60 * time.Second)
	for len(f.procs["farm-b"].logRecords("emulator ended")) == 0 {
		if time.Now().After(deadline) {
			p := f.procs["farm-b"]
			_ = p.cmd.Process.Signal(syscall.SIGQUIT) // its goroutines' stacks
			select {
			case <-p.done:
			case <-time.After(5 * time.Second):
			}
			t.Fatalf("farm-b's emulator did not end:\n%s", p.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.stop(farmNodes)
	l := f.status().Ledger
	if !l.Balanced || l.Built != want || l.LostTotal() != 0 {
		t.Fatalf("farm ledger: %s", l)
	}
	nb := uint64(len(splitSources(t, farmSources(t, f.files["farm-b"]))))
	for _, n := range farmNodes {
		nl := readLedger(t, f.sums[n])
		if !nl.Balanced || nl.Farm == nil || nl.Farm.Agent.RU == nil || nl.Farm.Agent.RU.Held != 0 {
			t.Fatalf("%s ledger: %+v (farm %+v)", n, nl, nl.Farm)
		}
		never := nl.Farm.Agent.RU.NeverAnnouncedTotal()
		wantNever := uint64(0)
		if n == "farm-b" {
			wantNever = extra * 10 * nb // its extra passes' events × its sources
		}
		if never != wantNever {
			t.Fatalf("%s: %d elements never announced, want %d (%v)", n, never, wantNever, nl.Farm.Agent.RU.NeverAnnounced)
		}
	}
}
