// Package e2e runs the real sluice binary and plugin binaries as
// subprocesses: the demo configuration on the real LHCb sample, fault
// injection over shm and TCP, SIGTERM and SIGKILL mid-run, and a
// configuration with mistakes. TestMain builds the binaries once.
package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node"
	"github.com/sluice-daq/sluice/node/transport/shm"
	"github.com/sluice-daq/sluice/plugins"
)

var (
	repo string // the module root: subprocesses run there (configs name files relative to it)
	bin  string // built binaries: bin/sluice, bin/plugins/*
)

func TestMain(m *testing.M) {
	flag.Parse()
	if r := flag.Lookup("test.run"); r != nil && r.Value.String() == "^$" {
		os.Exit(m.Run()) // benchmarks or fuzzing only: nothing here needs the binaries
	}
	os.Exit(func() int {
		var err error
		if repo, err = filepath.Abs("../.."); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		dir, err := os.MkdirTemp("", "sluice-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		bin = dir
		for _, b := range [][]string{
			{"-o", filepath.Join(bin, "sluice"), "./cmd/sluice"},
			{"-o", filepath.Join(bin, "plugins") + "/", "./plugins/examples/..."},
		} {
			cmd := exec.Command("go", append([]string{"build"}, b...)...)
			cmd.Dir, cmd.Stdout, cmd.Stderr = repo, os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				fmt.Fprintln(os.Stderr, "e2e: building the binaries:", err)
				return 1
			}
		}
		code := m.Run()
		if left := shmLeftovers(); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "e2e: files left in %s by the tests or the processes they started: %v\n", shm.Dir, left)
			return 1
		}
		return code
	}())
}

// regionPrefix starts the /dev/shm file name of a plugin host's regions,
// then its pid.
const regionPrefix = plugins.RegionPrefix

// started are the pids of every sluice process the tests started, so that
// TestMain can look for /dev/shm files they left.
var started struct {
	mu   sync.Mutex
	pids []int
}

// shmLeftovers lists the /dev/shm files that belong to this test process
// and still exist: rings named by shmName (and their temporary files while
// created) and the plugin regions of the sluice processes it started.
func shmLeftovers() []string {
	patterns := []string{
		fmt.Sprintf("sluice-e2e-%d-*", os.Getpid()),
		fmt.Sprintf(".sluice-e2e-%d-*", os.Getpid()),
	}
	started.mu.Lock()
	for _, pid := range started.pids {
		patterns = append(patterns, fmt.Sprintf("%s%d-*", regionPrefix, pid))
	}
	started.mu.Unlock()
	var out []string
	for _, p := range patterns {
		m, _ := filepath.Glob(filepath.Join(shm.Dir, p))
		out = append(out, m...)
	}
	return out
}

// removeShmOf removes what a killed sluice process of test t may have left
// in /dev/shm: the test's rings (a killed writer never removes its ring)
// and the process's plugin regions.
func removeShmOf(t *testing.T, pid int) {
	ring := shmName(t)
	for _, p := range []string{ring + "*", "." + ring + "*", fmt.Sprintf("%s%d-*", regionPrefix, pid)} {
		m, _ := filepath.Glob(filepath.Join(shm.Dir, p))
		for _, f := range m {
			if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
				t.Errorf("removing %s left by killed pid %d: %v", f, pid, err)
			}
		}
	}
}

// proc is one `sluice` subprocess.
type proc struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	mu     sync.Mutex
	stderr []string
	addr   chan string // the HTTP address, from the "http listening" log record
	http   string      // what httpAddr took from addr
	done   chan struct{}
	err    error
}

// start runs bin/sluice with args in the repository root.
func start(t *testing.T, args ...string) *proc {
	t.Helper()
	return startProgram(t, filepath.Join(bin, "sluice"), args...)
}

// startProgram runs program (sluice, or a command that runs it) with args
// in the repository root.
func startProgram(t *testing.T, program string, args ...string) *proc {
	t.Helper()
	p := &proc{addr: make(chan string, 1), done: make(chan struct{})}
	p.cmd = exec.Command(program, args...)
	p.cmd.Dir = repo
	// Killed with the test binary, also when it dies of a timeout's panic
	// (TestMain's cleanup does not run then): a leaked node would hold its
	// ports, rings and CPU on a machine other tests share.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.cmd.Stdout = &p.stdout
	errPipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started.mu.Lock()
	started.pids = append(started.pids, p.cmd.Process.Pid)
	started.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(errPipe)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.stderr = append(p.stderr, line)
			p.mu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "http listening" {
				p.addr <- rec.Addr
			}
		}
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		// A process killed (by the test, or just now because the test
		// failed) removed nothing it had created in /dev/shm.
		if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			removeShmOf(t, p.cmd.Process.Pid)
		}
	})
	return p
}

// wait waits (at most limit) for the process and returns its exit status.
func (p *proc) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(limit):
		// SIGQUIT first: the Go runtime writes every goroutine's stack to
		// stderr, which says where a node that does not end is stuck.
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		t.Fatalf("sluice %v did not end within %v\nstdout:\n%s\nstderr:\n%s", p.cmd.Args[1:], limit, p.stdout.String(), p.log())
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatal(p.err)
	}
	return 0
}

func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.stderr, "\n")
}

// httpAddr waits for the node's HTTP address (and remembers it, for the
// next call).
func (p *proc) httpAddr(t *testing.T) string {
	t.Helper()
	if p.http != "" {
		return p.http
	}
	select {
	case a := <-p.addr:
		p.http = a
		return a
	case <-p.done:
		t.Fatalf("sluice ended before serving HTTP:\n%s", p.log())
	case <-time.After(30 * time.Second):
		t.Fatal("no HTTP address logged")
	}
	return ""
}

// runOK runs sluice to completion and fails the test on a non-zero exit.
func runOK(t *testing.T, args ...string) string {
	t.Helper()
	p := start(t, args...)
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("sluice %v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, p.stdout.String(), p.log())
	}
	return p.stdout.String()
}

// status is the part of GET /status the tests read.
type status struct {
	State  string             `json:"state"`
	Ledger node.Ledger        `json:"ledger"`
	Inputs []node.InputStatus `json:"inputs"`
	// Latency: each latency histogram's count and quantiles.
	Latency []node.LatencyStatus `json:"latency"`
}

func getStatus(t *testing.T, addr string) (status, error) {
	var s status
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

// waitStored polls /status until at least n events are stored.
func waitStored(t *testing.T, p *proc, addr string, n uint64) status {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		s, err := getStatus(t, addr)
		if err == nil && s.Ledger.EventsStored >= n {
			return s
		}
		select {
		case <-p.done:
			t.Fatalf("the node ended before storing %d events:\n%s", n, p.log())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("fewer than %d events stored after 60 s", n)
	return status{}
}

func readLedger(t *testing.T, path string) node.Ledger {
	t.Helper()
	var l node.Ledger
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatal(err)
	}
	return l
}

// writeConfig writes text with every {{KEY}} replaced.
func writeConfig(t *testing.T, text string, vars map[string]string) string {
	t.Helper()
	for k, v := range vars {
		text = strings.ReplaceAll(text, "{{"+k+"}}", v)
	}
	// Without an http section the node listens on the default
	// 127.0.0.1:9464, which anything else on the machine (a demo, a
	// real node) may hold: a CI run beside `make run` failed there.
	if !strings.HasPrefix(text, "http:") && !strings.Contains(text, "\nhttp:") {
		text = strings.TrimRight(text, "\n") + "\nhttp: {address: \"127.0.0.1:0\"}\n"
	}
	f := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// shmName is a ring name unique to this test process and test.
func shmName(t *testing.T) string {
	return fmt.Sprintf("sluice-e2e-%d-%s", os.Getpid(), strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
}

// storeStat is `sluice store stat --json`: events per stream.
func storeStat(t *testing.T, dir string) map[string]uint64 {
	t.Helper()
	out := runOK(t, "store", "stat", "--path", dir, "--json")
	var st struct {
		Streams []struct {
			Stream string `json:"stream"`
			Events uint64 `json:"events"`
		} `json:"streams"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("store stat: %v\n%s", err, out)
	}
	m := map[string]uint64{}
	for _, s := range st.Streams {
		m[s.Stream] = s.Events
	}
	return m
}

// pluginProcesses lists running processes started from the test's plugin
// binaries (orphans would survive their node).
func pluginProcesses(t *testing.T) []string {
	t.Helper()
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		exe, err := os.Readlink(filepath.Join(d, "exe"))
		if err == nil && strings.HasPrefix(exe, filepath.Join(bin, "plugins")) {
			out = append(out, d+" "+exe)
		}
	}
	return out
}
