package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPluginNewBuildsAndChecks writes a plugin project with the sluice
// checkout detected from this binary's sources, runs its own test and builds
// it offline (module cache only), then runs it under `sluice plugin check`.
func TestPluginNewBuildsAndChecks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin project")
	}
	dir := filepath.Join(t.TempDir(), "demo")
	out, err := run(t, "plugin", "new", "demo", "--dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	root, _ := filepath.Abs("../..")
	if !strings.Contains(out, "sluice checkout "+root) {
		t.Fatalf("detected checkout: %s, want %s", out, root)
	}
	gomod, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
	if !strings.Contains(string(gomod), "replace github.com/sluice-daq/sluice => "+root) {
		t.Fatalf("go.mod lacks the replace directive:\n%s", gomod)
	}
	for _, f := range []string{"main.go", "main_test.go", "Makefile", "README.md", "go.sum"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	offline := append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off")
	for _, args := range [][]string{{"test", "./..."}, {"build", "-o", "bin/demo", "."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = dir, offline
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %v in the new project: %v\n%s", args, err, b)
		}
	}
	out, err = run(t, "plugin", "check", filepath.Join(dir, "bin", "demo"), "--events", "5")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// 10 sources × 64 bytes = 640 bytes per event > min_bytes 500: accepted.
	for _, want := range []string{"name     demo", "lines    big", "handshake ok", "1          accept   big", "5 events: 5 accept, 0 reject, 0 defer"} {
		if !strings.Contains(out, want) {
			t.Fatalf("check output lacks %q:\n%s", want, out)
		}
	}
	out, err = run(t, "plugin", "check", filepath.Join(dir, "bin", "demo"), "--param", "min_bytes=1000", "--inline")
	if err != nil || !strings.Contains(out, "8 events: 0 accept, 8 reject, 0 defer") {
		t.Fatalf("check with min_bytes=1000: %v\n%s", err, out)
	}
	if _, err := run(t, "plugin", "check", filepath.Join(dir, "bin", "demo"), "--param", "min_byte=1"); err == nil || !strings.Contains(err.Error(), "min_byte") {
		t.Fatalf("misspelt parameter: %v", err)
	}
	if _, err := run(t, "plugin", "new", "demo", "--dir", dir); err == nil {
		t.Fatal("plugin new overwrote an existing directory")
	}
}

// TestPluginCheckRefusesNonPlugins: a program that is not a plugin and a
// plugin of another protocol version give errors naming the binary.
func TestPluginCheckRefusesNonPlugins(t *testing.T) {
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "../../plugins/internal/testplugins/wrongproto", "../../plugins/internal/testplugins/notplugin")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	for _, c := range []struct{ name, says string }{
		{"notplugin", "not a sluice trigger plugin"},
		{"wrongproto", "another trigger protocol version"},
	} {
		path := filepath.Join(bin, c.name)
		_, err := run(t, "plugin", "check", path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	if _, err := run(t, "plugin", "new", "Bad-Name"); err == nil {
		t.Error("plugin new accepted a name that is not a Go identifier")
	}
	if _, err := run(t, "plugin", "new", "x", "--sluice-dir", bin); err == nil || !strings.Contains(err.Error(), "no go.mod") {
		t.Errorf("--sluice-dir without a checkout: %v", err)
	}
}
