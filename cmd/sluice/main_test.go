package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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
	if !strings.Contains(out, "peer transports: tcp") || !strings.Contains(out, "ucx") {
		t.Fatalf("version output %q does not say which peer transports (and whether UCX) are in", out)
	}
}

// `sluice --version` is a flag too, printing the same line as `sluice version`.
func TestVersionFlag(t *testing.T) {
	flag, err := run(t, "--version")
	if err != nil {
		t.Fatal(err)
	}
	cmd, _ := run(t, "version")
	if flag != cmd {
		t.Fatalf("--version printed %q, version printed %q", flag, cmd)
	}
}

// Every flag's help shows a plain placeholder: pflag takes text in
// backquotes as the value's name, which once made `sluice run --help` show
// "--config sluice config default".
func TestFlagHelpPlaceholders(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if strings.Contains(f.Usage, "`") {
				t.Errorf("sluice %s --%s: usage %q has backquotes; pflag shows their text as the value name", c.CommandPath(), f.Name, f.Usage)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
	out, _ := run(t, "run", "--help")
	if !strings.Contains(out, "--config string") {
		t.Fatalf("sluice run --help does not show '--config string':\n%s", out)
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
