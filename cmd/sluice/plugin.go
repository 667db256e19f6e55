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
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/cobra"

	"github.com/sluice-daq/sluice/internal/synth"
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
			fmt.Fprintf(cmd.OutOrStdout(), "wrote plugin project %s in %s (sluice checkout %s)\nnext: cd %s && make test && make check   # builds bin/%s and runs sluice plugin check on it\n",
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
func isSluiceDir(dir string) bool { return moduleOf(dir) == sluiceModule }

// moduleOf returns the module path on the first line of dir's go.mod (the
// line sluice's go.mod and the generated ones start with), or "".
func moduleOf(dir string) string {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	if !s.Scan() {
		return ""
	}
	m, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module ")
	if !ok {
		return ""
	}
	return strings.TrimSpace(m)
}

// sluiceCommand is the default SLUICE of a generated Makefile: the resolved
// absolute path of the running sluice binary, so that `make check` works
// without sluice on PATH. It is "sluice" (found on PATH) when the path is
// unknown or holds characters a make variable cannot carry unquoted.
func sluiceCommand() string {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil || !filepath.IsAbs(exe) || strings.ContainsAny(exe, " \t\n$#\\'\"") {
		return "sluice"
	}
	return exe
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
		Name, Type, Module, SluiceDir, Sluice, GoLine, Requires string
	}{
		Name: name, Type: strings.ReplaceAll(name, "_", "") + "Trigger", Module: sluiceModule,
		SluiceDir: sluiceDir, Sluice: sluiceCommand(), GoLine: goLine, Requires: strings.TrimSpace(text[i:]),
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
	var seed uint64
	var inline bool
	cmd := &cobra.Command{
		Use:   "check BINARY",
		Short: "Start a trigger plugin, check its handshake, describe it and run it on synthetic events",
		Long: `Starts the plugin binary (for a project written by plugin new: bin/NAME,
built by make build), checks the handshake, prints its description and its
decision on synthetic events of the emulator's ECAL, HCAL and muon sources.
The events' sizes are drawn from --seed over 160 to 2560 payload bytes, and
every 8th event from the 4th is corrupt (a fragment failing its CRC), every
8th from the 7th incomplete (a muon source missing), so that the check sees
more than one decision; the counts per decision close the output.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			if err := checkStartable(path); err != nil {
				return fmt.Errorf("plugin check: %w", err)
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
			return checkPlugin(cmd, path, p, events, seed, inline)
		},
	}
	cmd.Flags().StringArrayVar(&params, "param", nil, "plugin parameter KEY=VALUE (repeatable)")
	cmd.Flags().IntVar(&events, "events", 16, "synthetic events to decide")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of the synthetic events' sizes and payloads")
	cmd.Flags().BoolVar(&inline, "inline", false, "send the batch in the gRPC request instead of shared memory")
	return cmd
}

// checkStartable returns an error saying what to pass instead when path
// cannot be started as a plugin: a directory (such as the project plugin new
// writes) or a file without execute permission (such as its main.go).
// Without it the user gets the handshake error of a failed fork/exec.
func checkStartable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	switch {
	case fi.IsDir():
		bin, ok := projectBinary(path)
		if !ok {
			return fmt.Errorf("%s is a directory; pass the plugin binary", path)
		}
		return fmt.Errorf("%s is a directory; build it (make build) and pass the binary, e.g. %s%s", path, bin, notBuilt(bin))
	case fi.Mode().Perm()&0o111 == 0:
		if bin, ok := projectBinary(filepath.Dir(path)); ok {
			return fmt.Errorf("%s is not executable (mode %s); build the project (make build) and pass the binary, e.g. %s%s", path, fi.Mode(), bin, notBuilt(bin))
		}
		return fmt.Errorf("%s is not executable (mode %s); pass the plugin binary", path, fi.Mode())
	}
	return nil
}

// projectBinary returns where the Makefile of the project in dir (one that
// plugin new wrote: go.mod's module is the plugin's name) builds the plugin,
// and false if dir has no go.mod.
func projectBinary(dir string) (string, bool) {
	name := moduleOf(dir)
	if name == "" {
		return "", false
	}
	return filepath.Join(dir, "bin", filepath.Base(name)), true
}

// notBuilt says so when bin does not exist yet.
func notBuilt(bin string) string {
	if _, err := os.Stat(bin); err != nil {
		return " (not built yet)"
	}
	return ""
}

// checkStage labels the plugin's log lines (plugins.Options.Stage).
const checkStage = "check"

// checkPlugin starts the plugin, prints its description, and prints its
// decision on each of a batch of synthetic events (see checkEvents) and the
// count per decision.
func checkPlugin(cmd *cobra.Command, path string, params map[string]string, events int, seed uint64, inline bool) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
	defer cancel()
	out := cmd.OutOrStdout()
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	r, err := triggertest.Binary(ctx, path, params, plugins.Options{Inline: inline, Logger: log, Stage: checkStage, StartTimeout: 20 * time.Second})
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
	batches, err := checkEvents(memory.NewGoAllocator(), events, seed)
	if err != nil {
		return fmt.Errorf("plugin check: synthetic events: %w", err)
	}
	defer triggertest.Release(batches)
	res, err := triggertest.Run(ctx, r, batches)
	if err != nil {
		return fmt.Errorf("plugin check: %w", err)
	}
	// What the plugin was given, row by row in the order of res.
	var bytes []int
	var status []schemas.EventStatus
	for _, rec := range batches {
		ev, err := schemas.NewEventBatch(rec)
		if err != nil {
			return err
		}
		for i := range ev.Len() {
			n := 0
			for g := range ev.Groups {
				n += len(ev.GroupPayload(g, i))
			}
			bytes = append(bytes, n)
			status = append(status, ev.Status(i))
		}
	}
	fmt.Fprintf(out, "\n%-10s %6s %-18s %-8s %s\n", "event id", "bytes", "status", "decision", "lines")
	var count [4]int
	for k, x := range res {
		var lines []string
		for _, name := range schemas.FiredLines(x.Lines, d.Lines) {
			lines = append(lines, name)
		}
		note := ""
		if x.Reason.Text != "" {
			note = "  (" + x.Reason.Text + ")"
		}
		fmt.Fprintf(out, "%-10d %6d %-18s %-8s %s%s\n", x.EventID, bytes[k], statusText(status[k]), x.Decision, strings.Join(lines, ","), note)
		count[x.Decision&3]++
	}
	fmt.Fprintf(out, "\n%d events: %d %s, %d %s, %d %s\n", len(res),
		count[schemas.DecisionAccept], schemas.DecisionAccept, count[schemas.DecisionReject], schemas.DecisionReject,
		count[schemas.DecisionDefer], schemas.DecisionDefer)
	return nil
}

// statusText names the status bits a synthetic event can carry.
func statusText(s schemas.EventStatus) string {
	var names []string
	if s&schemas.StatusCorrupt != 0 {
		names = append(names, "corrupt")
	}
	if s&schemas.StatusIncomplete != 0 {
		names = append(names, "incomplete")
	}
	if len(names) == 0 {
		return "ok"
	}
	return strings.Join(names, ",")
}

// Fragment sizes of the synthetic events: an event's mean payload bytes per
// source is log-uniform over [checkMinFragment, checkMaxFragment], each
// source's size within ±50 % of it (synth.Spec.SpreadSizes). The emulator's
// payloads are whole 8-byte records.
const (
	checkMinFragment = 16
	checkMaxFragment = 256
)

// checkEvents returns n synthetic events, ids 1…n, in one batch: the
// emulator's sources and payloads (synth.Events) with sizes drawn from
// seed, every 8th event from the 4th with its first fragment failing its
// CRC (corrupt) and every 8th from the 7th without its first muon source
// (incomplete). They go through the native fragment stream
// (triggertest.Native), as a node would build them. The caller releases
// the batches.
func checkEvents(mem memory.Allocator, n int, seed uint64) ([]arrow.RecordBatch, error) {
	groups := synth.DefaultGroups()
	var stream []byte
	for _, ev := range synth.Events(synth.Spec{FirstEventID: 1, Events: n, Groups: groups, Seed: seed,
		SpreadSizes: [2]int{checkMinFragment, checkMaxFragment}, Faults: true}) {
		for gi, g := range groups {
			for si, src := range g.Sources {
				p := ev.Fragments[gi][si]
				if p == nil {
					continue
				}
				f := schemas.Fragment{SourceID: src, EventID: ev.ID, Payload: p, CRC: schemas.Checksum(p)}
				if slices.Contains(ev.Corrupt, src) {
					f.CRC ^= 1
				}
				stream = schemas.AppendFragment(stream, &f, false)
			}
		}
	}
	return triggertest.Native(mem, stream, groups, n)
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

func (t *{{.Type}}) Decide(ev *schemas.EventBatch, out []schemas.Verdict) error {
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
# SLUICE defaults to the sluice binary that wrote this project; override it
# (make check SLUICE=...) if that binary moves or to use another build.
GO     ?= go
SLUICE ?= {{.Sluice}}

.PHONY: build test check clean

build:
	$(GO) build -o bin/{{.Name}} .

test:
	$(GO) test ./...

# Starts the built plugin as the node would and runs it on synthetic events.
check: build
	$(SLUICE) plugin check bin/{{.Name}}

clean:
	rm -rf bin
`,
	"README.md": `# {{.Name}} — a sluice trigger plugin

A trigger plugin for the sluice node: a separate program that the node starts
and hands batches of events (Arrow record batches, one row per event).
` + "`main.go`" + ` implements ` + "`sdk.Trigger`" + ` (Describe, Configure, Decide) and
calls ` + "`sdk.Serve`" + `.

Decide reads each batch through ` + "`schemas.EventBatch`" + `. The template sums
an event's payload bytes over its source groups (` + "`ev.Groups`" + `, and
` + "`ev.GroupPayload(g, i)`" + `: group g's payloads of event i back to back),
defers events whose ` + "`ev.Status(i)`" + ` has ` + "`schemas.StatusCorrupt`" + ` (naming
` + "`ev.EventID(i)`" + `), and accepts those above min_bytes on its line "big".
The other accessors of event i: ` + "`ev.GroupIndex(name)`" + ` (a group's index, or
-1), ` + "`ev.GroupSizes(g, i)`" + ` (each source's payload size in group g),
` + "`ev.Fragments(g, i, fn)`" + ` (each source of group g with its payload),
` + "`ev.EachFragment(i, fn)`" + ` (every source of every group), ` + "`ev.Payload(source, i)`" + `
(one source's payload), ` + "`ev.MissingSources(i)`" + ` and ` + "`ev.CorruptSources(i)`" + `.
List the groups Decide reads in ` + "`Description.Columns`" + ` and the node sends
only those.

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
    make check    # $(SLUICE) plugin check bin/{{.Name}}: handshake, description, decisions

` + "`sluice plugin check`" + ` takes the built binary (bin/{{.Name}}), not this
directory. The Makefile's SLUICE defaults to the sluice binary that wrote the
project ({{.Sluice}}); override it with ` + "`make check SLUICE=...`" + `.

Without network access use ` + "`GOFLAGS=-mod=mod GOPROXY=off make test`" + `.

## Deploying

Name the binary in the node's config as the plugin of a trigger stage, with
its parameters (here ` + "`min_bytes`" + `). Log with ` + "`sdk.Logger(\"{{.Name}}\")`" + `:
the lines appear in the node's log under the plugin's name.
`,
	".gitignore": "bin/\n",
}
