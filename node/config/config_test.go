package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluice-daq/sluice/node/internal/memtransport"
	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/node/transport/tcp"
	"github.com/sluice-daq/sluice/plugins"
)

// TestDefaultYAMLMatchesCode keeps the commented default file and the
// defaults in code (each package's own: builder.Defaults,
// storage.DefaultOptions, plugins.DefaultStage, base) from drifting apart:
// the file parses to Default(), its commented stage example holds the stage
// defaults, and it writes every key the configuration types accept.
func TestDefaultYAMLMatchesCode(t *testing.T) {
	c, err := Parse(DefaultYAML)
	if err != nil {
		t.Fatalf("the default config does not validate: %v", err)
	}
	got, _ := yaml.Marshal(c)
	want, _ := yaml.Marshal(Default())
	if string(got) != string(want) {
		t.Fatalf("DefaultYAML and Default() differ:\n--- DefaultYAML\n%s\n--- Default()\n%s", got, want)
	}
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}

	full := uncommentStageExample(t, DefaultYAML)
	c, err = Parse(full)
	if err != nil {
		t.Fatalf("default.yaml with its stage example uncommented: %v", err)
	}
	if len(c.Trigger.Stages) != 1 {
		t.Fatalf("stage example: %d stages", len(c.Trigger.Stages))
	}
	ex := c.Trigger.Stages[0]
	def := plugins.DefaultStage()
	def.Name, def.Plugin = ex.Name, ex.Plugin
	if ex.Shadow == nil {
		t.Fatal("the stage example in default.yaml has no shadow")
	}
	sh := plugins.DefaultShadow()
	sh.Plugin = ex.Shadow.Plugin
	def.Shadow = &sh
	got, _ = yaml.Marshal(ex)
	want, _ = yaml.Marshal(def)
	if string(got) != string(want) {
		t.Errorf("the stage example in default.yaml is not plugins.DefaultStage():\n--- default.yaml\n%s\n--- DefaultStage\n%s", got, want)
	}

	var root yaml.Node
	if err := yaml.Unmarshal(full, &root); err != nil {
		t.Fatal(err)
	}
	written := map[string]bool{}
	writtenKeys(&root, "", written)
	for _, k := range typeKeys(reflect.TypeOf(Config{}), "") {
		if !written[k] {
			t.Errorf("default.yaml does not write %s", k)
		}
	}
}

// uncommentStageExample turns the commented stage under "stages: []" into
// a stage.
func uncommentStageExample(t *testing.T, data []byte) []byte {
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		if l != "  stages: []" {
			continue
		}
		lines[i] = "  stages:"
		j := i + 1
		for ; j < len(lines) && strings.HasPrefix(lines[j], "  # "); j++ {
			lines[j] = "  " + lines[j][len("  # "):]
		}
		if j == i+1 {
			t.Fatal("no commented stage example after trigger.stages")
		}
		return []byte(strings.Join(lines, "\n"))
	}
	t.Fatal(`default.yaml has no "  stages: []" line`)
	return nil
}

// writtenKeys records the key paths a YAML document writes, list items as
// "[]" ("trigger.stages[].name").
func writtenKeys(n *yaml.Node, path string, out map[string]bool) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			writtenKeys(c, path, out)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := n.Content[i].Value
			if path != "" {
				p = path + "." + p
			}
			out[p] = true
			writtenKeys(n.Content[i+1], p, out)
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			writtenKeys(c, path+"[]", out)
		}
	}
}

// typeKeys lists the key paths the configuration type t accepts, in the
// form of writtenKeys; a map (params, prescales) is one key.
func typeKeys(t reflect.Type, path string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice:
		return typeKeys(t.Elem(), path+"[]")
	case reflect.Struct:
	default:
		return nil
	}
	var out []string
	for key, f := range yamlFields(t) {
		p := key
		if path != "" {
			p = path + "." + key
		}
		out = append(out, p)
		out = append(out, typeKeys(f.Type, p)...)
	}
	sort.Strings(out)
	return out
}

func TestDefaultsFilled(t *testing.T) {
	c, err := Parse([]byte(minimal + "trigger:\n  stages:\n    - {name: hlt1, plugin: x}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Builder.Timeout != time.Second || c.Node.MemoryBudget != 512<<20 || c.HTTP.Address != "127.0.0.1:9464" {
		t.Fatalf("scalar defaults not applied: %+v %+v", c.Builder, c.HTTP)
	}
	if s := c.Trigger.Stages[0]; s.Instances != 1 || s.When != plugins.WhenOnline || s.Deadline != 10*time.Second {
		t.Fatalf("stage defaults not applied: %+v", s)
	}
	if o, ok := c.Inputs[0].Options.(*tcp.Options); !ok || *o != tcp.DefaultOptions() {
		t.Fatalf("input defaults not applied: %+v", c.Inputs[0].Options)
	}
	g, err := c.Groups()
	if err != nil || len(g) != 1 || g[0].Name != "velo" || len(g[0].Sources) != 4 {
		t.Fatalf("Groups() = %v, %v", g, err)
	}
}

func TestByteSizes(t *testing.T) {
	for in, want := range map[string]ByteSize{"268435456": 256 << 20, "256MiB": 256 << 20, "2GB": 2e9, `"1 GiB"`: 1 << 30} {
		c, err := Parse([]byte(minimal + "node:\n  memory_budget: " + in + "\n"))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if c.Node.MemoryBudget != want {
			t.Errorf("%s parsed as %d, want %d", in, c.Node.MemoryBudget, want)
		}
	}
	if s := ByteSize(256 << 20).String(); s != "256MiB" {
		t.Errorf("String = %q", s)
	}
}

func TestStageSelection(t *testing.T) {
	c, err := Parse([]byte(minimal + `
trigger:
  stages:
    - {name: hlt1, plugin: p}
    - {name: hlt2, plugin: q, when: replay}
    - {name: mon, plugin: r, when: both}
`))
	if err != nil {
		t.Fatal(err)
	}
	names := func(ss []plugins.StageConfig) (out []string) {
		for _, s := range ss {
			out = append(out, s.Name)
		}
		return
	}
	if got := strings.Join(names(c.OnlineStages()), ","); got != "hlt1,mon" {
		t.Errorf("online = %s", got)
	}
	if got := strings.Join(names(c.ReplayStages()), ","); got != "hlt2,mon" {
		t.Errorf("replay = %s", got)
	}
	c.Replay.Stages = []string{"hlt1"}
	if got := strings.Join(names(c.ReplayStages()), ","); got != "hlt1" {
		t.Errorf("replay with replay.stages = %s", got)
	}
}

func TestPreflight(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "plugin")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	notExe := filepath.Join(dir, "data.txt")
	if err := os.WriteFile(notExe, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Parse([]byte(`
inputs:
  - {uri: tcp://127.0.0.1:7000, max_connections: 1}
  - uri: shm://r
    emulator: {from: ` + dir + `/missing.mdf}
sources: [{name: a, sources: "1"}]
trigger:
  stages:
    - {name: a, plugin: ` + exe + `}
    - {name: b, plugin: ` + notExe + `}
    - {name: c, plugin: ` + dir + `/nope}
store: {path: ` + notExe + `}
`))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Preflight()
	var ce *Error
	// The shell script is executable but no plugin: found by starting it.
	if !errors.As(err, &ce) || len(ce.Problems) != 5 {
		t.Fatalf("want 5 problems, got %v", err)
	}
	for _, w := range []string{"trigger.stages[0].plugin", "want a trigger plugin that starts", "trigger.stages[1].plugin", "want an executable file", "trigger.stages[2].plugin", "no such file",
		"inputs[1].emulator.from", "store.path"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("missing %q in %v", w, err)
		}
	}
}

func TestLoadNamesFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(p, []byte("inputs: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if err == nil || !strings.HasPrefix(err.Error(), p+": 2 problem(s)") {
		t.Fatalf("got %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(DefaultYAML)
	f.Add([]byte(minimal))
	f.Add([]byte("inputs: [{uri: 'tcp://[::1]:0'}]\nsources: [{name: a, sources: '0-4294967295'}]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err == nil && c.Validate() != nil {
			t.Fatal("Parse accepted a config that Validate rejects")
		}
	})
}

// The commented default file shows every key of every transport with its
// default, the input's beside uri and the sender's in the emulator section:
// they are written in from the registry (withTransportKeys), so a new
// transport needs no edit here; this fails if default.yaml lost a marker.
func TestDefaultYAMLDocumentsTransportKeys(t *testing.T) {
	text := string(DefaultYAML)
	for _, tr := range transport.Registered() {
		if tr.Scheme == memtransport.Transport.Scheme {
			continue // the test transport is documented in its package
		}
		for _, opts := range []any{tr.NewInputOptions, tr.NewSenderOptions} {
			var o any
			switch f := opts.(type) {
			case func() transport.InputOptions:
				if f != nil {
					o = f()
				}
			case func() transport.SenderOptions:
				if f != nil {
					o = f()
				}
			}
			if o == nil {
				continue
			}
			var m yaml.Node
			if err := m.Encode(o); err != nil {
				t.Fatal(err)
			}
			for i := 0; i+1 < len(m.Content); i += 2 {
				kv := m.Content[i].Value + ": " + m.Content[i+1].Value
				if !strings.Contains(text, kv) {
					t.Errorf("%s://: default.yaml does not say %q", tr.Scheme, kv)
				}
			}
		}
	}
}

// Each transport's line in the default file says what it is and shows its
// URI options (peer:// once had neither: no description, no ?transport=).
func TestDefaultYAMLDescribesTransports(t *testing.T) {
	text := string(DefaultYAML)
	for _, tr := range transport.Registered() {
		if tr.Scheme == memtransport.Transport.Scheme || tr.NewInputOptions == nil {
			continue
		}
		if tr.About == "" {
			t.Errorf("%s:// has no About", tr.Scheme)
			continue
		}
		var line string
		for _, l := range strings.Split(text, "\n") {
			if strings.Contains(l, "#   "+tr.Scheme+"://") {
				line = l
				break
			}
		}
		if !strings.Contains(line, tr.About) {
			t.Errorf("%s://: default.yaml's line %q lacks its description %q", tr.Scheme, line, tr.About)
		}
		for _, q := range tr.Query {
			if !strings.Contains(line, "?"+q+"=") {
				t.Errorf("%s://: default.yaml's line %q does not show its option %s=", tr.Scheme, line, q)
			}
		}
	}
	if !strings.Contains(text, "transport=tcp|ucx") {
		t.Errorf("default.yaml does not say peer://'s transports (tcp|ucx)")
	}
}

func TestMarshalWritesTransportKeys(t *testing.T) {
	c, err := Parse([]byte(`
inputs:
  - uri: tcp://127.0.0.1:7000
    credit_window: 1MiB
    emulator: {connections: 3}
sources: [{name: a, sources: "1"}]
`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(c.Inputs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"uri: tcp://127.0.0.1:7000\ncredit_window: 1MiB\nsocket_buffer: 8MiB\nexpect_streams: 0\nmax_connections: 0\npreamble_timeout: 10s\nemulator:\n", "    connections: 3\n    socket_buffer: 4MiB\n"} {
		if !strings.Contains(string(b), w) {
			t.Errorf("marshalled input lacks %q:\n%s", w, b)
		}
	}
	again, err := Parse(append(b[:0:0], "inputs:\n  - "+strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", "\n    ")+"\nsources: [{name: a, sources: \"1\"}]\n"...))
	if err != nil {
		t.Fatalf("marshalled input does not parse: %v", err)
	}
	if o := again.Inputs[0].Options.(*tcp.Options); o.CreditWindow != 1<<20 || again.Inputs[0].Emulator.Sender.(*tcp.SenderOptions).Connections != 3 {
		t.Fatalf("round trip: %+v %+v", o, again.Inputs[0].Emulator.Sender)
	}
}
