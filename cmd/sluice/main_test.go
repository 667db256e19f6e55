package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

// run executes the CLI in-process with args and returns stdout.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := newRootCmd()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestVersion(t *testing.T) {
	out, err := run(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "sluice ") || !strings.Contains(out, runtime.Version()) {
		t.Fatalf("version output %q lacks the version or Go version", out)
	}
}

func TestCompletion(t *testing.T) {
	out, err := run(t, "completion", "bash")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "__start_sluice") {
		t.Fatalf("bash completion script does not define __start_sluice: %.200q", out)
	}
}
