package main

import (
	"os"
	"path/filepath"
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
