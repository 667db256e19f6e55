package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestConfigDefaultValidates(t *testing.T) {
	out, err := run(t, "config", "default")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "default.yaml")
	if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, "config", "validate", p); err != nil || !strings.Contains(out, p+": ok") {
		t.Fatalf("the printed default config does not validate: %v\n%s", err, out)
	}
}

// TestValidateSaysMachineNotChecked: a plain validate passes a
// store.min_free_bytes larger than any disk (it may be meant for another
// machine) but says that it did not check this machine and how to;
// --preflight refuses it with exit status 3.
func TestValidateSaysMachineNotChecked(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "big.yaml")
	cfg := "inputs:\n  - uri: tcp://127.0.0.1:0\nsources: [{name: a, sources: \"0-3\"}]\nstore: {path: " + strconv.Quote(filepath.Join(dir, "store")) + ", min_free_bytes: 10TiB}\n"
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "config", "validate", p)
	if err != nil {
		t.Fatalf("plain validate: %v\n%s", err, out)
	}
	if want := p + ": ok (the file only; --preflight also checks this machine: /dev/shm space, the store's file system,"; !strings.HasPrefix(out, want) {
		t.Errorf("plain validate says %q, want it to start with %q", out, want)
	}
	out, err = run(t, "config", "validate", "--preflight", p)
	if c := exitCode(err); err == nil || c != exitConfig {
		t.Fatalf("validate --preflight: exit %d (%v), want %d\n%s", c, err, exitConfig, out)
	}
	if !strings.Contains(out, "store.min_free_bytes: 10TiB: want less than the size of the file system") {
		t.Errorf("validate --preflight does not name store.min_free_bytes:\n%s", out)
	}
	help, _ := run(t, "config", "validate", "--help")
	if !strings.Contains(help, "Without --preflight only the files are checked, not this machine") {
		t.Errorf("validate --help does not say what --preflight adds:\n%s", help)
	}
}

func TestConfigValidateListsEveryProblem(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.yaml")
	bad := `
inputs:
  - uri: tcp://nohost
sources:
  - {name: velo, sources: "0-3"}
trigger:
  stages:
    - {name: hlt1}
    - {name: hlt2, plugin: x, deferal: {fraction: 0.5}}
store: {sync: sometimes}
`
	if err := os.WriteFile(p, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "config", "validate", p)
	if err == nil {
		t.Fatalf("a config with mistakes validated:\n%s", out)
	}
	if c := exitCode(err); c != exitConfig {
		t.Errorf("exit status %d, want %d (configuration problems, as sluice run)", c, exitConfig)
	}
	for _, w := range []string{"4 problem(s)", "inputs[0].uri", "trigger.stages[0].plugin", `trigger.stages[1].deferal (line 9): unknown key "deferal"`, `store.sync: "sometimes"`} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// TestShippedConfigsValidate checks every config in configs/ statically
// (plugin binaries need not be built for this).
func TestShippedConfigsValidate(t *testing.T) {
	files, _ := filepath.Glob("../../configs/*.yaml")
	if len(files) == 0 {
		t.Skip("no shipped configs yet")
	}
	for _, f := range files {
		if out, err := run(t, "config", "validate", f); err != nil {
			t.Errorf("%s: %v\n%s", f, err, out)
		}
	}
}

// buildPlugin builds an example plugin into a temporary directory.
func buildPlugin(t *testing.T, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	build := exec.Command("go", "build", "-o", out, "../../plugins/examples/"+name)
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatal(err)
	}
	return out
}

// `config validate --preflight -` reads standard input and lists every
// problem at once: those of the file itself and those only this machine
// and the plugin know (a store path under /proc, a parameter the plugin
// refuses, a prescale on a line it lacks, a source group it reads that the
// config does not define), with exit status 3; `sluice run` refuses the
// same config with the same list before opening anything.
func TestConfigPreflightListsEveryProblem(t *testing.T) {
	l0 := buildPlugin(t, "l0calo")
	cfg := `
inputs:
  - uri: shm://sluice-preflight-` + strconv.Itoa(os.Getpid()) + `
    emulator: {events: 10}
sources:
  - {name: ecal, sources: "0-3"}
  - {name: hcal, sources: "4-5"}
trigger:
  stages:
    - {name: l0, plugin: ` + l0 + `, params: {muon_pt: "1"}, prescales: {photon: 2}}
replay: {rate: -5}
store: {path: /proc/sluice-store}
`
	want := []string{
		"5 problem(s)",
		"replay.rate: -5",
		`store.path: "/proc/sluice-store": want a path that can be created: cannot write in /proc`,
		`trigger.stages[0].params: "{muon_pt: \"1\"}": want parameters plugin l0calo accepts: unknown parameter "muon_pt"`,
		"trigger.stages[0].prescales.photon: 2: want a line plugin l0calo declares",
		`plugin l0calo reads source group "muon", which sources does not define (groups: ecal, hcal)`,
	}
	var out bytes.Buffer
	root := newRootCmd()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(cfg))
	root.SetArgs([]string{"config", "validate", "--preflight", "-"})
	err := root.Execute()
	if c := exitCode(err); c != exitConfig {
		t.Fatalf("exit status %d, want %d:\n%s", c, exitConfig, out.String())
	}
	for _, w := range append(want, "(stdin): ") {
		if !strings.Contains(out.String(), w) {
			t.Errorf("validate output lacks %q:\n%s", w, out.String())
		}
	}
	file := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	rout, err := run(t, "run", "--config", file)
	if c := exitCode(err); c != exitConfig {
		t.Fatalf("sluice run: exit status %d, want %d: %v\n%s", c, exitConfig, err, rout)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("sluice run's error lacks %q:\n%v", w, err)
		}
	}
}

// A fill schedule that cannot be used is a configuration problem: `sluice
// run` exits 3 naming fill.schedule and what is wrong in the file (the
// entry and field), before opening anything.
func TestConfigBadFillSchedule(t *testing.T) {
	dir := t.TempDir()
	sched := filepath.Join(dir, "schedule.yaml")
	if err := os.WriteFile(sched, []byte("format: 1\nfills:\n  - {fill: 1, start: 2026-12-01T08:00:00Z, end: 2026-12-01T07:00:00Z}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := func(schedule string) string {
		file := filepath.Join(t.TempDir(), "node.yaml")
		doc := `
inputs: [{uri: "tcp://127.0.0.1:0"}]
sources: [{name: ecal, sources: "0-3"}]
trigger:
  stages:
    - {name: hlt1, plugin: /bin/true}
    - {name: hlt2, plugin: /bin/true, when: replay}
store: {path: ` + filepath.Join(dir, "store") + `}
http: {address: off}
fill: {schedule: ` + schedule + `}
`
		if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return file
	}
	for _, c := range []struct{ schedule, want string }{
		{sched, `fill.schedule: "` + sched + `": want a valid schedule file: bad accelerator schedule: fills[0].end: 2026-12-01T07:00:00Z: want after its start`},
		{filepath.Join(dir, "none.yaml"), "fill.schedule: \"" + filepath.Join(dir, "none.yaml") + "\": want a readable schedule file: no such file or directory"},
	} {
		out, err := run(t, "run", "--config", cfg(c.schedule))
		if code := exitCode(err); code != exitConfig {
			t.Fatalf("exit status %d, want %d: %v\n%s", code, exitConfig, err, out)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("sluice run's error lacks %q:\n%v", c.want, err)
		}
	}
}

// Problems only the preflight finds (the config itself is valid) name the
// file they are in, or standard input, as every other problem does.
func TestPreflightNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	cfg := `
inputs:
  - uri: shm://sluice-cmdtest-preflight
    emulator: {from: ` + filepath.Join(dir, "missing.mdf") + `}
sources:
  - {name: ecal, sources: "0-3"}
store: {path: ` + filepath.Join(dir, "store") + `}
`
	file := filepath.Join(dir, "node.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "config", "validate", "--preflight", file)
	if exitCode(err) != exitConfig || !strings.HasPrefix(out, file+": 1 problem(s)\n  inputs[0].emulator.from: ") {
		t.Fatalf("exit %d:\n%s", exitCode(err), out)
	}
	var b bytes.Buffer
	root := newRootCmd()
	root.SetOut(&b)
	root.SetErr(&b)
	root.SetIn(strings.NewReader(cfg))
	root.SetArgs([]string{"config", "validate", "--preflight", "-"})
	if err := root.Execute(); exitCode(err) != exitConfig || !strings.HasPrefix(b.String(), "(stdin): 1 problem(s)\n") {
		t.Fatalf("exit %d:\n%s", exitCode(err), b.String())
	}
}
