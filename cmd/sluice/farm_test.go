package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node"
	"github.com/sluice-daq/sluice/node/config"
	"github.com/sluice-daq/sluice/node/farm"
	"github.com/sluice-daq/sluice/node/farm/control"
)

// farmNodeConfig writes a node configuration with two source groups and
// one trigger stage whose plugin is a file of known bytes.
func farmNodeConfig(t *testing.T, plugin string) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "gec")
	if err := os.WriteFile(bin, []byte(plugin), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := `
inputs:
  - uri: tcp://127.0.0.1:7999
sources:
  - {name: velo, sources: "0-3"}
  - {name: calo, sources: "10,11"}
trigger:
  stages:
    - name: hlt1
      plugin: ` + bin + `
      params: {max_hits: "500"}
      prescales: {minbias: 100}
`
	p := filepath.Join(dir, "node.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFarmStartStopStatus: start records the run configuration from a node
// configuration (plugin digest included) and the run state; a second
// start with another protocol is refused naming the difference; status
// shows members, EM and run state (text and JSON); stop stops the run.
func TestFarmStartStopStatus(t *testing.T) {
	s, err := control.StartServer(control.ServerConfig{DataDir: t.TempDir(), Listen: "http://127.0.0.1:0", Peer: "http://127.0.0.1:0", TickMs: 20, ElectionMs: 200})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	flags := []string{"--etcd", s.Endpoint(), "--farm", "cli-test"}
	farmRun := func(args ...string) (string, error) {
		return run(t, append(append([]string{"farm"}, args...), flags...)...)
	}
	if _, err := farmRun("stop"); err == nil || !strings.Contains(err.Error(), "never ran") {
		t.Fatalf("stop before any run: %v", err)
	}
	if _, err := farmRun("start", "--run", "3"); err == nil || !strings.Contains(err.Error(), "no run configuration") {
		t.Fatalf("start without a configuration: %v", err)
	}
	// A farm setting without a configuration file would be ignored: refused.
	if _, err := farmRun("start", "--run", "3", "--protocol", "pull", "--release", "durable"); exitCode(err) != exitConfig ||
		!strings.Contains(err.Error(), "--protocol, --release need --config") {
		t.Fatalf("farm settings without --config: %v (exit %d)", err, exitCode(err))
	}
	cfg := farmNodeConfig(t, "plugin bytes")
	out, err := farmRun("start", "--run", "3", "--config", cfg, "--assignment-size", "10")
	if err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	if !strings.Contains(out, "run 3 running") {
		t.Fatalf("start output %q", out)
	}
	// The same configuration again is fine; another protocol is refused.
	if out, err := farmRun("start", "--run", "3", "--config", cfg, "--assignment-size", "10"); err != nil {
		t.Fatalf("same start again: %v\n%s", err, out)
	}
	_, err = farmRun("start", "--run", "3", "--config", cfg, "--assignment-size", "10", "--protocol", "pull")
	if !errors.Is(err, farm.ErrConfigMismatch) || !strings.Contains(err.Error(), "protocol: farm has push, this node pull") {
		t.Fatalf("differing start: %v", err)
	}
	// A node with another plugin binary is refused by its digest.
	c, err := control.Dial(context.Background(), control.Config{Endpoints: []string{s.Endpoint()}, Farm: "cli-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	other, err := farmRunConfig(t, farmNodeConfig(t, "other plugin bytes"), 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckRun(context.Background(), other); !errors.Is(err, farm.ErrConfigMismatch) || !strings.Contains(err.Error(), "plugins[hlt1].digest") {
		t.Fatalf("node with another plugin: %v", err)
	}
	// n1's HTTP endpoint: its /status as a running folded node that leads.
	nodeStatus := node.Status{Node: "n1", State: node.StateRunning, Rates: node.Rates{EventsPerSecond: 1234, BytesPerSecond: 56.7e6},
		Farm: &node.FarmStatus{Farm: "cli-test", Roles: "ru,bu,em", EM: "n1", IsEM: true,
			RU:      &farm.RUStats{HeldBytes: 3 << 20},
			BU:      &farm.BUStats{InFlight: 2, BytesUsed: 1 << 20},
			EMState: &farm.EMStats{Credits: map[string]int64{"n1": 40}}}}
	nodeHTTP := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(nodeStatus)
	}))
	defer nodeHTTP.Close()
	ms, err := c.Join(context.Background(), control.Member{Node: "n1", Roles: (farm.RoleRU | farm.RoleBU | farm.RoleEM).String(), Sources: "0-3", Address: "127.0.0.1:7001",
		HTTP: strings.TrimPrefix(nodeHTTP.URL, "http://")}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Campaign(context.Background(), ms); err != nil {
		t.Fatal(err)
	}

	out, err = farmRun("status")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"farm cli-test", "run 3: running", "protocol push, 10 events per assignment, release decided",
		"event manager: n1", "members: 1", "ru,bu,em",
		"nodes (their own /status):\n  NODE  STATE    EVENTS/S  MB/S  RU HELD MiB  BU IN FLIGHT  CREDIT  PEERS UP  HTTP",
		"n1    running  1234      56.7  3.0          2 (1.0 MiB)   40      0/0       127.0.0.1:",
		"farm rates: 1234 events/s built, 56.7 MB/s into the builders"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	out, err = farmRun("status", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var st farmView
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	if len(st.Nodes) != 1 || st.Nodes[0].Error != "" || st.Nodes[0].State != "running" || st.Nodes[0].Rates.EventsPerSecond != 1234 ||
		st.Nodes[0].Farm == nil || st.Nodes[0].Farm.EMState.Credits["n1"] != 40 {
		t.Fatalf("status --json nodes %+v", st.Nodes)
	}
	sum := sha256.Sum256([]byte("plugin bytes"))
	if len(st.Members) != 1 || uint64(st.Members[0].Incarnation) != ms.Incarnation() || st.EM == nil || uint64(st.EM.Incarnation) != ms.Incarnation() ||
		st.Config == nil || st.Config.Plugins[0].Digest != hex.EncodeToString(sum[:]) || st.Config.Prescales["hlt1"]["minbias"] != 100 ||
		st.Config.Sources[1].Sources != "10-11" {
		t.Fatalf("status %+v", st)
	}
	if out, err := farmRun("stop"); err != nil || !strings.Contains(out, "run 3 stopping") {
		t.Fatalf("stop: %v %q", err, out)
	}
	if out, _ := farmRun("status"); !strings.Contains(out, "run 3: stopped") {
		t.Fatalf("status after stop:\n%s", out)
	}
}

func farmRunConfig(t *testing.T, path string, run uint32) (farm.RunConfig, error) {
	t.Helper()
	nc, err := config.Load(path)
	if err != nil {
		return farm.RunConfig{}, err
	}
	return runConfigOf(nc, run, runOpts{assignmentSize: 10}, func(flag string) bool { return flag == "assignment-size" })
}

// TestFarmStartHelp: the farm settings' flags say that their defaults are
// the configuration file's farm section, with the section's own defaults.
func TestFarmStartHelp(t *testing.T) {
	out, err := run(t, "farm", "start", "--help")
	if err != nil {
		t.Fatal(err)
	}
	def := farm.DefaultConfig()
	for _, want := range []string{
		"(default: farm.protocol of --config, itself " + def.Protocol + " when",
		"(default: farm.unit of --config, itself " + def.Unit + " when",
		fmt.Sprintf("(default: farm.assignment_size of --config, itself %d when", def.AssignmentSize),
		"(default: farm.release of --config, itself " + def.Release + " when",
		fmt.Sprintf("(default: farm.max_outstanding of --config, itself %d when", def.MaxOutstanding),
		fmt.Sprintf("(default: farm.release_group of --config, itself %d when", def.ReleaseGroup),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "(default 1)") || strings.Contains(out, `(default "push")`) {
		t.Errorf("help shows a flag default that is not what start records:\n%s", out)
	}
}

// TestFarmEtcd: `sluice farm etcd` serves until its context ends and says
// where.
func TestFarmEtcd(t *testing.T) {
	pr, pw := io.Pipe()
	root := newRootCmd()
	root.SetOut(pw)
	root.SetErr(pw)
	root.SetArgs([]string{"farm", "etcd", "--data-dir", t.TempDir(), "--listen", "http://127.0.0.1:0", "--peer", "http://127.0.0.1:0", "--tick-ms", "20", "--election-ms", "200"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx); pw.Close() }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no output: %v (%v)", err, <-done)
	}
	ep, ok := strings.CutPrefix(strings.TrimSpace(line), "etcd: serving ")
	if !ok {
		t.Fatalf("first line %q", line)
	}
	c, err := control.Dial(context.Background(), control.Config{Endpoints: []string{ep}, Farm: "f"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetRunState(context.Background(), control.RunState{State: control.StateRunning, Run: 1}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	cancel()
	go io.Copy(io.Discard, pr)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("farm etcd did not stop with its context")
	}
}

// TestFarmSD: `sluice farm sd` serves the farm's members with an HTTP
// endpoint as Prometheus http_sd target groups, read from etcd.
func TestFarmSD(t *testing.T) {
	s, err := control.StartServer(control.ServerConfig{DataDir: t.TempDir(), Listen: "http://127.0.0.1:0", Peer: "http://127.0.0.1:0", TickMs: 20, ElectionMs: 200})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := control.Dial(context.Background(), control.Config{Endpoints: []string{s.Endpoint()}, Farm: "sd-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Join(context.Background(), control.Member{Node: "n1", Roles: "ru,bu,em", Sources: "0-3", Address: "127.0.0.1:7001", HTTP: "127.0.0.1:9470"}, time.Second); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	root := newRootCmd()
	root.SetOut(pw)
	root.SetErr(pw)
	root.SetArgs([]string{"farm", "sd", "--listen", "127.0.0.1:0", "--etcd", s.Endpoint(), "--farm", "sd-test"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx); pw.Close() }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no output: %v (%v)", err, <-done)
	}
	go io.Copy(io.Discard, pr)
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "farm sd: serving ")
	url, _, _ = strings.Cut(url, " ")
	if !ok {
		t.Fatalf("first line %q", line)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var groups []control.TargetGroup
	if err := json.Unmarshal(body, &groups); err != nil || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%v %q: %s", err, resp.Header.Get("Content-Type"), body)
	}
	if len(groups) != 1 || len(groups[0].Targets) != 1 || groups[0].Targets[0] != "127.0.0.1:9470" ||
		groups[0].Labels["node"] != "n1" || groups[0].Labels["farm"] != "sd-test" || groups[0].Labels["roles"] != "ru,bu,em" {
		t.Fatalf("groups %+v", groups)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("farm sd did not stop with its context")
	}
}
