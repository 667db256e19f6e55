package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"text/template"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/cobra"

	"github.com/sluice-daq/sluice/plugins"
	"github.com/sluice-daq/sluice/plugins/sdk/triggertest"
	"github.com/sluice-daq/sluice/schemas"
)

func init() { register(newPluginCmd) }

// sluiceModule is the module path the generated plugin projects depend on.
const sluiceModule = "github.com/sluice-daq/sluice"

func newPluginCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugin",
		Short: "Write and check trigger plugins",
	}
	cmd.AddCommand(newPluginNewCmd(), newPluginCheckCmd())
	return cmd
}

func newPluginNewCmd() *cobra.Command {
	var sluiceDir, dir string
	cmd := &cobra.Command{
		Use:   "new NAME",
		Short: "Write a ready-to-build trigger plugin project in ./NAME",
		Long: `Writes a trigger plugin project (main.go, main_test.go, Makefile, README.md,
go.mod, go.sum) that builds and tests offline against a local sluice checkout:
its go.mod replaces ` + sluiceModule + ` with that directory, given by
--sluice-dir or else found from where this sluice binary was built, from the
binary's location, or from the working directory.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !regexp.MustCompile(`^[a-z][a-z0-9_]*$`).MatchString(name) {
				return fmt.Errorf("plugin new: name %q: use lower-case letters, digits and _ (a Go identifier)", name)
			}
			src, err := findSluiceDir(sluiceDir)
			if err != nil {
				return fmt.Errorf("plugin new: %w", err)
			}
			if dir == "" {
				dir = name
			}
			if err := writePluginProject(dir, name, src); err != nil {
				return fmt.Errorf("plugin new: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote plugin project %s in %s (sluice checkout %s)\nnext: cd %s && make test && make build && sluice plugin check bin/%s\n",
				name, dir, src, dir, name)
			return nil
		},
	}
	cmd.Flags().StringVar(&sluiceDir, "sluice-dir", "", "local sluice checkout to build against (default: detected)")
	cmd.Flags().StringVar(&dir, "dir", "", "directory to write the project into (default ./NAME); must not exist")
	return cmd
}

// findSluiceDir returns the sluice checkout to build plugins against: the
// flag's value, else the source tree this binary was built from (its file
// paths are in the binary unless built with -trimpath), else an ancestor
// of the executable or of the working directory holding sluice's go.mod.
func findSluiceDir(flag string) (string, error) {
	if flag != "" {
		abs, err := filepath.Abs(flag)
		if err != nil {
			return "", err
		}
		if !isSluiceDir(abs) {
			return "", fmt.Errorf("--sluice-dir %s: no go.mod of module %s there", abs, sluiceModule)
		}
		return abs, nil
	}
	var starts []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, d := range starts {
		for ; ; d = filepath.Dir(d) {
			if isSluiceDir(d) {
				return d, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", fmt.Errorf("cannot find a sluice checkout (tried %v); give --sluice-dir", starts)
}

// isSluiceDir reports whether dir holds the go.mod of the sluice module.
func isSluiceDir(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	return s.Scan() && strings.TrimSpace(s.Text()) == "module "+sluiceModule
}

// writePluginProject writes the project files into dir (created; it must
// not exist). go.mod requires sluice through the replace directive plus
// every module sluice requires, at sluice's versions, and go.sum is
// sluice's, so that the project builds from the module cache alone.
func writePluginProject(dir, name, sluiceDir string) error {
	gomod, err := os.ReadFile(filepath.Join(sluiceDir, "go.mod"))
	if err != nil {
		return err
	}
	gosum, err := os.ReadFile(filepath.Join(sluiceDir, "go.sum"))
	if err != nil {
		return err
	}
	text := string(gomod)
	i := strings.Index(text, "\nrequire")
	if i < 0 {
		return fmt.Errorf("%s/go.mod has no require block", sluiceDir)
	}
	goLine := "go 1.26.0"
	for _, l := range strings.Split(text[:i], "\n") {
		if strings.HasPrefix(l, "go ") {
			goLine = l
		}
	}
	data := struct {
		Name, Type, Module, SluiceDir, GoLine, Requires string
	}{
		Name: name, Type: strings.ReplaceAll(name, "_", "") + "Trigger", Module: sluiceModule,
		SluiceDir: sluiceDir, GoLine: goLine, Requires: strings.TrimSpace(text[i:]),
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	for file, tmpl := range pluginTemplates {
		var b strings.Builder
		if err := template.Must(template.New(file).Parse(tmpl)).Execute(&b, data); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "go.sum"), gosum, 0o644)
}

func newPluginCheckCmd() *cobra.Command {
	var params []string
	var events int
	var inline bool
	cmd := &cobra.Command{
		Use:   "check BINARY",
		Short: "Start a trigger plugin, check its handshake, describe it and run it on synthetic events",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			p := map[string]string{}
			for _, kv := range params {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return fmt.Errorf("plugin check: --param %q: want KEY=VALUE", kv)
				}
				p[k] = v
			}
			if events <= 0 {
				return errors.New("plugin check: --events must be positive")
			}
			return checkPlugin(cmd, path, p, events, inline)
		},
	}
	cmd.Flags().StringArrayVar(&params, "param", nil, "plugin parameter KEY=VALUE (repeatable)")
	cmd.Flags().IntVar(&events, "events", 8, "synthetic events to decide")
	cmd.Flags().BoolVar(&inline, "inline", false, "send the batch in the gRPC request instead of shared memory")
	return cmd
}

// checkPlugin starts the plugin, prints its description, and prints its
// decision on each of a batch of the emulator's synthetic events.
func checkPlugin(cmd *cobra.Command, path string, params map[string]string, events int, inline bool) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
	defer cancel()
	out := cmd.OutOrStdout()
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	r, err := triggertest.Binary(ctx, path, params, plugins.Options{Inline: inline, Logger: log, StartTimeout: 20 * time.Second})
	if err != nil {
		return fmt.Errorf("plugin check: %w", err)
	}
	defer r.Close()
	d := r.Description()
	columns := "all"
	if len(d.Columns) > 0 {
		columns = strings.Join(d.Columns, ", ")
	}
	fmt.Fprintf(out, "plugin   %s\nname     %s\nversion  %s\nprotocol sluice.trigger.v%d (handshake ok)\nlines    %s\ncolumns  %s\n",
		path, d.Name, d.Version, plugins.ProtocolVersion, strings.Join(d.Lines, ", "), columns)
	mem := memory.NewGoAllocator()
	batches, err := triggertest.Synthetic(mem, 1, events, events, 64, 1)
	if err != nil {
		return err
	}
	defer triggertest.Release(batches)
	res, err := triggertest.Run(ctx, r, batches)
	if err != nil {
		return fmt.Errorf("plugin check: %w", err)
	}
	fmt.Fprintf(out, "\n%-10s %-8s %s\n", "event id", "decision", "lines")
	var count [4]int
	for _, x := range res {
		var lines []string
		for b, name := range d.Lines {
			if x.Lines&(1<<b) != 0 {
				lines = append(lines, name)
			}
		}
		note := ""
		if x.Annotation != "" {
			note = "  (" + x.Annotation + ")"
		}
		fmt.Fprintf(out, "%-10d %-8s %s%s\n", x.EventID, x.Decision, strings.Join(lines, ","), note)
		count[x.Decision&3]++
	}
	fmt.Fprintf(out, "\n%d events: %d %s, %d %s, %d %s\n", len(res),
		count[schemas.DecisionAccept], schemas.DecisionAccept, count[schemas.DecisionReject], schemas.DecisionReject,
		count[schemas.DecisionDefer], schemas.DecisionDefer)
	return nil
}

// pluginTemplates are the files of a new plugin project (text/template).
var pluginTemplates = map[string]string{
	"go.mod": `module {{.Name}}

{{.GoLine}}

// The sluice module is not published: build against a local checkout.
replace {{.Module}} => {{.SluiceDir}}

require {{.Module}} v0.0.0-00010101000000-000000000000

// The modules sluice requires, at sluice's versions.
{{.Requires}}
`,
	"main.go": `// Command {{.Name}} is a sluice trigger plugin. The sluice node starts it as
// a separate process and hands it batches of events; see the README.
package main

import (
	"fmt"

	"{{.Module}}/plugins/sdk"
	"{{.Module}}/schemas"
)

// {{.Type}} accepts events whose payloads hold more than min_bytes bytes in
// total (parameter min_bytes, default 500) on its one line, "big", and
// rejects the others. Replace Decide with your selection.
type {{.Type}} struct {
	minBytes uint64
}

func (t *{{.Type}}) Describe() sdk.Description {
	// Columns could list the source groups Decide reads; empty means all.
	return sdk.Description{Name: "{{.Name}}", Version: "0.1.0", Lines: []string{"big"}}
}

func (t *{{.Type}}) Configure(params map[string]string) error {
	if err := sdk.CheckParams(params, "min_bytes"); err != nil {
		return err
	}
	var err error
	t.minBytes, err = sdk.ParamUint(params, "min_bytes", 500)
	return err
}

func (t *{{.Type}}) Decide(ev *schemas.EventBatch, out []sdk.Result) error {
	for i := range out {
		var n uint64
		for g := range ev.Groups {
			n += uint64(len(ev.GroupPayload(g, i)))
		}
		switch {
		case ev.Status(i)&schemas.StatusCorrupt != 0:
			out[i] = sdk.Defer(fmt.Sprintf("event %d has a corrupt fragment", ev.EventID(i)))
		case n > t.minBytes:
			out[i] = sdk.Accept(1) // line 0, "big"
		default:
			out[i] = sdk.Reject()
		}
	}
	return nil
}

func main() { sdk.Serve(&{{.Type}}{}) }
`,
	"main_test.go": `package main

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"{{.Module}}/plugins/sdk/triggertest"
	"{{.Module}}/schemas"
)

// TestDecide runs the trigger in process on synthetic events of 10 sources
// × 64 bytes (640 payload bytes each): all pass min_bytes=600, none
// min_bytes=640.
func TestDecide(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	batches, err := triggertest.Synthetic(mem, 1, 100, 40, 64, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer triggertest.Release(batches)
	for minBytes, want := range map[string]schemas.Decision{"600": schemas.DecisionAccept, "640": schemas.DecisionReject} {
		r, err := triggertest.InProcess(&{{.Type}}{}, map[string]string{"min_bytes": minBytes})
		if err != nil {
			t.Fatal(err)
		}
		res, err := triggertest.Run(context.Background(), r, batches)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 100 {
			t.Fatalf("%d decisions for 100 events", len(res))
		}
		for _, d := range res {
			if d.Decision != want || (want == schemas.DecisionAccept) != (d.Lines == 1) {
				t.Fatalf("min_bytes=%s event %d: %v lines %b, want %v", minBytes, d.EventID, d.Decision, d.Lines, want)
			}
		}
	}
	if _, err := triggertest.InProcess(&{{.Type}}{}, map[string]string{"min_byte": "1"}); err == nil {
		t.Fatal("a misspelt parameter was accepted")
	}
}
`,
	"Makefile": `# {{.Name}}: a sluice trigger plugin. Builds offline against the sluice
# checkout named in go.mod's replace directive.
GO     ?= go
SLUICE ?= sluice

.PHONY: build test check clean

build:
	$(GO) build -o bin/{{.Name}} .

test:
	$(GO) test ./...

# Starts the plugin as the node would and runs it on synthetic events.
check: build
	$(SLUICE) plugin check bin/{{.Name}}

clean:
	rm -rf bin
`,
	"README.md": `# {{.Name}} — a sluice trigger plugin

A trigger plugin for the sluice node: a separate program that the node starts
and hands batches of events (Arrow record batches, see
` + "`schemas.EventBatch`" + ` for typed access). ` + "`main.go`" + ` implements
` + "`sdk.Trigger`" + ` (Describe, Configure, Decide) and calls ` + "`sdk.Serve`" + `.

## Building offline against a local sluice checkout

The sluice module (` + "`{{.Module}}`" + `) is not published anywhere. This
project builds against the local checkout at

    {{.SluiceDir}}

through the ` + "`replace`" + ` directive in go.mod; go.mod and go.sum list the
modules sluice needs at sluice's versions, so nothing is downloaded when they
are in the module cache (build sluice there once). If the checkout moves,
edit the replace line.

    make test     # go test ./... (the trigger in process, on synthetic events)
    make build    # bin/{{.Name}}
    make check    # sluice plugin check bin/{{.Name}}: handshake, description, decisions

Without network access use ` + "`GOFLAGS=-mod=mod GOPROXY=off make test`" + `.

## Deploying

Name the binary in the node's config as the plugin of a trigger stage, with
its parameters (here ` + "`min_bytes`" + `). Log with ` + "`sdk.Logger(\"{{.Name}}\")`" + `:
the lines appear in the node's log under the plugin's name.
`,
	".gitignore": "bin/\n",
}
