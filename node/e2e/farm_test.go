package e2e

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node"
	"github.com/sluice-daq/sluice/node/farm"
	"github.com/sluice-daq/sluice/schemas/lhcb"
	"github.com/sluice-daq/sluice/storage"
)

// farmNodes are the three nodes of `make farm` (configs/farm-*.yaml).
var farmNodes = []string{"farm-a", "farm-b", "farm-c"}

// startEtcd runs `sluice farm etcd` (its own process, as a farm's etcd
// always is) on free ports and returns its client endpoint.
func startEtcd(t *testing.T) string {
	t.Helper()
	addr, _ := startEtcdProc(t)
	return addr
}

// startEtcdProc is startEtcd, also returning the etcd process (for tests
// that stop it).
func startEtcdProc(t *testing.T) (string, *os.Process) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "sluice"), "farm", "etcd", "--data-dir", filepath.Join(t.TempDir(), "etcd"),
		"--listen", "http://127.0.0.1:0", "--peer", "http://127.0.0.1:0", "--tick-ms", "20", "--election-ms", "200")
	cmd.Dir = repo
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started.mu.Lock()
	started.pids = append(started.pids, cmd.Process.Pid)
	started.mu.Unlock()
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	addr := make(chan string, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "etcd: serving "); ok {
				addr <- a
			}
		}
		_ = cmd.Wait()
	}()
	select {
	case a := <-addr:
		return a, cmd.Process
	case <-done:
		t.Fatalf("sluice farm etcd ended: %s", stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("sluice farm etcd did not serve within 30 s")
	}
	return "", nil
}

// farmConfig is configs/farm-<node>.yaml with loop passes, the test's
// farm id, etcd, token, store, ring and plugins, and (accept) a trigger
// chain that keeps every event.
func farmConfig(t *testing.T, node, farmID, etcd, token, loop string, accept bool) (file, store string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "configs", node+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	store = filepath.Join(t.TempDir(), "store")
	text := string(b)
	if accept {
		i, j := strings.Index(text, "\ntrigger:\n"), strings.Index(text, "\nstore:\n")
		if i < 0 || j < i {
			t.Fatalf("configs/%s.yaml: no trigger section before the store section", node)
		}
		text = text[:i] + "\ntrigger:\n  stages:\n    - name: all\n      plugin: bin/plugins/passthrough\n" + text[j:]
	}
	for old, repl := range map[string]string{
		"loop: 20":                    "loop: " + loop,
		"path: ./data/farm/" + node:   "path: " + store,
		"bin/plugins/":                filepath.Join(bin, "plugins") + "/",
		"shm://sluice-" + node:        "shm://" + shmName(t) + "-" + node,
		"min_free_bytes: 2GiB":        "min_free_bytes: 256MiB",
		"memory_budget: 512MiB":       "memory_budget: 320MiB", // above the least budget a farm node holds (farm pools beside the fixed memory)
		"ring_size: 64MiB":            "ring_size: 32MiB",
		"format: auto":                "format: json",
		"id: demo":                    "id: " + farmID,
		"token_file: data/farm/token": "token_file: " + token,
		"etcd: [127.0.0.1:2379]":      "etcd: [" + etcd + "]",
		// A loaded machine (the CI's, a busy laptop) must not fence a
		// live node: the deaths these tests cause are seen at once by
		// the transport (a killed process's sockets close); a stopped one
		// after the peer timeout.
		"peer_timeout: 2s": "peer_timeout: 3s",
		// Nor make a live RU's data late: an RU and a BU wait this long
		// for data that has not come (a dead RU is not waited for).
		"wait: 2s":             "wait: 5s",
		"sync_interval: 200ms": "sync_interval: 50ms",
		"max_open_events: 640": "max_open_events: 320",
	} {
		if !strings.Contains(text, old) {
			t.Fatalf("configs/%s.yaml no longer contains %q", node, old)
		}
		text = strings.ReplaceAll(text, old, repl)
	}
	if !httpPort.MatchString(text) {
		t.Fatalf("configs/%s.yaml: no loopback HTTP address", node)
	}
	text = httpPort.ReplaceAllString(text, "address: 127.0.0.1:0")
	f := filepath.Join(t.TempDir(), node+".yaml")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return f, store
}

var httpPort = regexp.MustCompile(`address: 127\.0\.0\.1:[0-9]+`)

// farmStatus is the part of `sluice farm status --json` the test reads.
type farmStatus struct {
	Run *struct {
		Run   uint32 `json:"run"`
		State string `json:"state"`
	} `json:"run"`
	Ledger  *farm.LedgerSummary `json:"ledger"`
	Members []struct {
		Node string `json:"node"`
		HTTP string `json:"http"`
	} `json:"members"`
	EM *struct {
		Node string `json:"node"`
	} `json:"em"`
}

// checkFarmHTTP reads every member's /status and /metrics at the address
// it registered (what Prometheus's service discovery gives): each shows
// its farm part — roles, the EM, its two peers connected, the run
// running — and the farm metrics.
func checkFarmHTTP(t *testing.T, st farmStatus, farmID string) {
	t.Helper()
	if len(st.Members) != len(farmNodes) || st.EM == nil {
		t.Fatalf("farm status: members %+v, em %+v", st.Members, st.EM)
	}
	for _, m := range st.Members {
		if m.HTTP == "" {
			t.Fatalf("%s registered no HTTP endpoint", m.Node)
		}
		b, err := httpGet("http://" + m.HTTP + "/status")
		if err != nil {
			t.Fatalf("%s /status: %v", m.Node, err)
		}
		var s struct {
			Node string `json:"node"`
			Farm *struct {
				Farm     string `json:"farm"`
				Roles    string `json:"roles"`
				EM       string `json:"em"`
				IsEM     bool   `json:"is_em"`
				RunState string `json:"run_state"`
				Peers    []struct {
					Node      string `json:"node"`
					Connected bool   `json:"connected"`
				} `json:"peers"`
				RU *struct{} `json:"ru"`
				BU *struct{} `json:"bu"`
			} `json:"farm"`
		}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s /status: %v", m.Node, err)
		}
		f := s.Farm
		if s.Node != m.Node || f == nil || f.Farm != farmID || f.Roles != "ru,bu,em" || f.EM != st.EM.Node ||
			f.IsEM != (m.Node == st.EM.Node) || f.RunState != "running" || len(f.Peers) != len(farmNodes)-1 || f.RU == nil || f.BU == nil {
			t.Fatalf("%s /status farm part: %s", m.Node, b)
		}
		for _, p := range f.Peers {
			if !p.Connected {
				t.Fatalf("%s /status: peer %s not connected: %s", m.Node, p.Node, b)
			}
		}
		mb, err := httpGet("http://" + m.HTTP + "/metrics")
		if err != nil {
			t.Fatalf("%s /metrics: %v", m.Node, err)
		}
		if want := `sluice_farm_member_info{farm="` + farmID + `"`; !strings.Contains(string(mb), want) {
			t.Fatalf("%s /metrics lacks %s", m.Node, want)
		}
	}
}

// TestFarmRealMDF is `make farm` as a test: etcd and three sluice run
// processes on loopback, each the readout unit of a third of the real
// LHCb sample's sources, a builder unit and an event manager candidate,
// with a chain that accepts every event; push, then pull. For each: the
// farm ledger balances with every announced event built once, every
// node's ledger balances, and the events stored across the three nodes,
// exported to MDF and merged, are the input events bank by bank (byte for
// byte apart from the ODIN event number each loop pass renumbers), each
// once.
func TestFarmRealMDF(t *testing.T) {
	const loop = 5 // 50 events per protocol
	etcd := startEtcd(t)
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("e2e-farm-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	farmID := fmt.Sprintf("e2e-%d", os.Getpid())
	farmArgs := []string{"--etcd", etcd, "--farm", farmID}

	input, err := os.ReadFile(filepath.Join(repo, sampleMDF))
	if err != nil {
		t.Fatal(err)
	}
	originals := map[uint64][]byte{}
	lo, hi := uint64(1<<64-1), uint64(0)
	for _, r := range mdfRecords(t, input) {
		rec, _, _ := lhcb.DecodeRecord(r)
		n, _ := odinNumber(t, rec.Body)
		originals[n] = r
		lo, hi = min(lo, n), max(hi, n)
	}
	span := hi - lo + 1
	want := uint64(loop) * uint64(len(originals))

	run := uint32(6718861)
	for _, proto := range []string{"push", "pull"} {
		t.Run(proto, func(t *testing.T) {
			run++
			files, stores := map[string]string{}, map[string]string{}
			for _, n := range farmNodes {
				files[n], stores[n] = farmConfig(t, n, farmID, etcd, token, fmt.Sprint(loop), true)
			}
			runOK(t, append([]string{"farm", "start", "--run", fmt.Sprint(run), "--config", files["farm-a"], "--protocol", proto}, farmArgs...)...)
			procs, sums := map[string]*proc{}, map[string]string{}
			for _, n := range farmNodes {
				sums[n] = filepath.Join(t.TempDir(), n+".run.json")
				procs[n] = start(t, "run", "--config", files[n], "--run", fmt.Sprint(run), "--protocol", proto, "--summary-json", sums[n])
			}
			// Every node's readout ends by itself; once the farm ledger
			// has every event built, the operator stops the run.
			var st farmStatus
			deadline := time.Now().Add(40 * time.Second)
			for {
				out := runOK(t, append([]string{"farm", "status", "--json"}, farmArgs...)...)
				st = farmStatus{}
				if err := json.Unmarshal([]byte(out), &st); err != nil {
					t.Fatalf("farm status --json: %v\n%s", err, out)
				}
				if l := st.Ledger; st.Run != nil && st.Run.Run == run && l != nil && l.Announced == want && l.Built == want && l.Open == 0 {
					checkFarmHTTP(t, st, farmID)
					break
				}
				for n, p := range procs {
					select {
					case <-p.done:
						t.Fatalf("%s ended before the farm stopped:\n%s\n%s", n, p.stdout.String(), p.log())
					default:
					}
				}
				if time.Now().After(deadline) {
					for n, p := range procs {
						t.Logf("%s:\n%s", n, p.log())
					}
					t.Fatalf("the farm did not build %d events within 40 s: %+v", want, st.Ledger)
				}
				time.Sleep(200 * time.Millisecond)
			}
			runOK(t, append([]string{"farm", "stop"}, farmArgs...)...)
			var built, stored uint64
			storedBy := map[string]uint64{}
			for _, n := range farmNodes {
				if code := procs[n].wait(t, 60*time.Second); code != 0 {
					t.Fatalf("%s: exit %d\n%s\n%s", n, code, procs[n].stdout.String(), procs[n].log())
				}
				if strings.Contains(procs[n].log(), "not in the emulator's file") {
					// The other RUs read the other sources.
					t.Fatalf("%s warns of sources its emulator's file lacks:\n%s", n, procs[n].log())
				}
				l := readLedger(t, sums[n])
				if !l.Balanced || l.Farm == nil || l.EventsIncomplete != 0 || l.Farm.GivenUp != 0 || l.FragmentsReceived != l.EventsBuilt*1239 {
					t.Fatalf("%s ledger: %+v (farm %+v)", n, l, l.Farm)
				}
				if got := st.Ledger.PerBU[n]; got != l.EventsBuilt {
					t.Fatalf("%s built %d events, the farm ledger says %d", n, l.EventsBuilt, got)
				}
				built += l.EventsBuilt
				stored += l.EventsStoredAccepted
				storedBy[n] = l.EventsStoredAccepted
			}
			l := st.Ledger
			if !l.Balanced || l.LostTotal() != 0 || l.Duplicate != 0 || built != want || stored != want {
				t.Fatalf("farm ledger %s; nodes built %d, stored %d, want %d", l.String(), built, stored, want)
			}
			// Merged stores = the input, bank by bank, each event once.
			exported := map[uint64]string{}
			for _, n := range farmNodes {
				if storedBy[n] == 0 {
					continue // a BU may get no work in a short run (an empty store has nothing to export)
				}
				// Its events' provenance names the BU and the assignment.
				ls := strings.Split(runOK(t, "store", "ls", "--path", stores[n], "--stream", "accepted", "--limit", "1"), "\n")
				if f := strings.Fields(ls[min(1, len(ls)-1)]); len(f) < 2 {
					t.Fatalf("%s: store ls: %q", n, ls)
				} else {
					var w storage.Why
					out := runOK(t, "store", "why", "--path", stores[n], fmt.Sprint(run), f[1], "--json")
					if err := json.Unmarshal([]byte(out), &w); err != nil || w.Built.BU != n || w.Built.Incarnation == "" || w.Built.Assignment == 0 {
						t.Fatalf("%s: store why %d %s: built %+v (%v), want by %s, an incarnation and an assignment", n, run, f[1], w.Built, err, n)
					}
				}
				exp := filepath.Join(t.TempDir(), n+".mdf")
				runOK(t, "store", "export", "--path", stores[n], "--stream", "accepted", "--format", "mdf", "--out", exp)
				b, err := os.ReadFile(exp)
				if err != nil {
					t.Fatal(err)
				}
				for i, r := range mdfRecords(t, b) {
					rec, _, _ := lhcb.DecodeRecord(r)
					num, at := odinNumber(t, rec.Body)
					if prev, dup := exported[num]; dup || num < lo || num >= lo+loop*span {
						t.Fatalf("%s: record %d has ODIN event number %d (outside %d..%d, or also stored by %q)", n, i, num, lo, lo+loop*span-1, prev)
					}
					exported[num] = n
					orig := lo + (num-lo)%span
					body := bytes.Clone(rec.Body)
					binary.LittleEndian.PutUint32(body[at+12:], uint32(orig>>32))
					binary.LittleEndian.PutUint32(body[at+16:], uint32(orig))
					back, err := lhcb.AppendRecord(nil, rec.Header, body, 0)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(back, originals[orig]) {
						t.Fatalf("%s: record %d (ODIN event number %d) differs from input event %d beyond its ODIN event number", n, i, num, orig)
					}
				}
			}
			if uint64(len(exported)) != want {
				t.Fatalf("%d events exported across the nodes, want %d", len(exported), want)
			}
		})
	}
}

// TestFarmPackets: unit: packets — the event manager assigns the
// readout's own packing (each source's k-th multi-fragment packet, as
// LHCb assigns MEPs), one packet per assignment, instead of event ids.
// Three nodes on the real LHCb sample (10 events per packet), every
// event accepted: the farm ledger counts packets, every announced packet
// built once; the nodes build every event once, complete, none split
// across packets, and their ledgers balance.
func TestFarmPackets(t *testing.T) {
	const loop = 3 // 30 events: 3 packets per source
	etcd := startEtcd(t)
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("e2e-farm-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	farmID := fmt.Sprintf("e2e-packets-%d", os.Getpid())
	farmArgs := []string{"--etcd", etcd, "--farm", farmID}
	run := uint32(6718861)
	for _, proto := range []string{"push", "pull"} {
		t.Run(proto, func(t *testing.T) {
			run++
			farmPackets(t, farmID, farmArgs, etcd, token, run, proto)
		})
	}
}

func farmPackets(t *testing.T, farmID string, farmArgs []string, etcd, token string, run uint32, proto string) {
	const loop = 3
	files := map[string]string{}
	for _, n := range farmNodes {
		f, _ := farmConfig(t, n, farmID, etcd, token, fmt.Sprint(loop), true)
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Replace(strings.Replace(string(b), "unit: events", "unit: packets", 1), "assignment_size: 10", "assignment_size: 1", 1)
		if !strings.Contains(text, "unit: packets") || !strings.Contains(text, "assignment_size: 1 ") {
			t.Fatalf("configs/%s.yaml: no unit: events or assignment_size: 10 to replace", n)
		}
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		files[n] = f
	}
	runOK(t, append([]string{"farm", "start", "--run", fmt.Sprint(run), "--config", files["farm-a"], "--protocol", proto}, farmArgs...)...)
	procs, sums := map[string]*proc{}, map[string]string{}
	for _, n := range farmNodes {
		sums[n] = filepath.Join(t.TempDir(), n+".run.json")
		procs[n] = start(t, "run", "--config", files[n], "--run", fmt.Sprint(run), "--protocol", proto, "--summary-json", sums[n])
	}
	const packets, events = loop, loop * 10
	var sent, received, held uint64
	var st farmStatus
	deadline := time.Now().Add(40 * time.Second)
	for {
		out := runOK(t, append([]string{"farm", "status", "--json"}, farmArgs...)...)
		st = farmStatus{}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("farm status --json: %v\n%s", err, out)
		}
		if l := st.Ledger; st.Run != nil && st.Run.Run == run && l != nil && l.Announced == packets && l.Built == packets && l.Open == 0 {
			break
		}
		for n, p := range procs {
			select {
			case <-p.done:
				t.Fatalf("%s ended before the farm stopped:\n%s\n%s", n, p.stdout.String(), p.log())
			default:
			}
		}
		if time.Now().After(deadline) {
			for n, p := range procs {
				t.Logf("%s:\n%s", n, p.log())
			}
			t.Fatalf("the farm did not build %d packets within 40 s: %+v", packets, st.Ledger)
		}
		time.Sleep(200 * time.Millisecond)
	}
	runOK(t, append([]string{"farm", "stop"}, farmArgs...)...)
	var built uint64
	for _, n := range farmNodes {
		if code := procs[n].wait(t, 60*time.Second); code != 0 {
			t.Fatalf("%s: exit %d\n%s\n%s", n, code, procs[n].stdout.String(), procs[n].log())
		}
		l := readLedger(t, sums[n])
		if !l.Balanced || l.Farm == nil || l.EventsIncomplete != 0 || l.Farm.SplitEvents != 0 || l.Farm.OutsideAssignment != 0 ||
			l.FragmentsReceived != l.EventsBuilt*1239 || l.EventsBuilt != l.Farm.Events {
			t.Fatalf("%s ledger: %+v (farm %+v)", n, l, l.Farm)
		}
		s, r, h := checkFarmMemory(t, n, l)
		sent, received, held = sent+s, received+r, held+h
		if l.EventsBuilt != 10*st.Ledger.PerBU[n] {
			t.Fatalf("%s built %d events, the farm ledger says %d packets of 10", n, l.EventsBuilt, st.Ledger.PerBU[n])
		}
		built += l.EventsBuilt
	}
	if l := st.Ledger; !l.Balanced || l.LostTotal() != 0 || built != events {
		t.Fatalf("farm ledger %s; nodes built %d events, want %d", l.String(), built, events)
	}
	if sent == 0 || received == 0 || held == 0 {
		t.Fatalf("farm memory peaks across the nodes: send %d, receive %d, held %d: none may be 0", sent, received, held)
	}
}

// checkFarmMemory: a folded node's ledger shows the farm's parts of the
// memory budget — the RU's send pool and the BU's receive pool, half of
// the farm part each, and what the RU held (in its inputs' rings) — each
// within its bound; it returns their peaks (sampled every 50 ms: a node
// that got little work may show 0).
func checkFarmMemory(t *testing.T, n string, l node.Ledger) (send, recv, held uint64) {
	t.Helper()
	if l.Memory == nil {
		t.Fatalf("%s: no memory in the ledger", n)
	}
	parts := map[string]node.MemoryPart{}
	for _, p := range l.Memory.Parts {
		parts[p.Name] = p
	}
	s, r, h := parts["farm send"], parts["farm receive"], parts["farm held (in inputs)"]
	farmBytes := uint64(float64(l.Memory.BudgetBytes)*0.15 + 0.5)
	if s.BoundBytes == 0 || s.BoundBytes+r.BoundBytes != farmBytes || h.BoundBytes != parts["inputs"].PeakBytes {
		t.Fatalf("%s: farm memory parts %+v, want send + receive = 15%% of %d", n, l.Memory.Parts, l.Memory.BudgetBytes)
	}
	for _, p := range []node.MemoryPart{s, r, h} {
		if p.PeakBytes > p.BoundBytes {
			t.Fatalf("%s: memory part %q peak %d above its bound %d", n, p.Name, p.PeakBytes, p.BoundBytes)
		}
	}
	return s.PeakBytes, r.PeakBytes, h.PeakBytes
}
