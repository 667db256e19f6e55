package scaffold

// templates are the files of a new plugin project (text/template), by
// name. The data is a project: Name, Type, Module, SluiceDir, Replace
// (SluiceDir relative to the project), Sluice, GoLine and Requires.
var templates = map[string]string{
	"go.mod": `module {{.Name}}

{{.GoLine}}

// The sluice module is not published: build against a local checkout, at
// this path relative to this directory. To use another checkout:
//   go mod edit -replace {{.Module}}=/path/to/sluice
replace {{.Module}} => {{.Replace}}

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

// lines are the trigger lines, by name: Decide fires them with
// lines.Accept("big").
var lines = sdk.Lines{"big"}

func (t *{{.Type}}) Describe() sdk.Description {
	// Columns could list the source groups Decide reads; empty means all.
	return sdk.Description{Name: "{{.Name}}", Version: "0.1.0", Lines: lines}
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
			out[i] = lines.Accept("big")
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

through the ` + "`replace`" + ` directive in go.mod, which names it relative to
this directory (` + "`{{.Replace}}`" + `), so the two may move together; go.mod and
go.sum list the modules sluice needs at sluice's versions, so nothing is
downloaded when they are in the module cache (build sluice there once). To
build against another checkout (or after moving one of them):

    go mod edit -replace {{.Module}}=/path/to/sluice

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
