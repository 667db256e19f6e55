package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluice-daq/sluice/node/internal/memtransport"
	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/node/transport/tcp"
	"github.com/sluice-daq/sluice/plugins"
)

// minimal is the smallest valid configuration; table cases append to it.
const minimal = `
inputs:
  - uri: tcp://127.0.0.1:7000
sources:
  - name: velo
    sources: "0-3"
`

func TestDefaultYAMLParsesToDefault(t *testing.T) {
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
}

func TestDefaultsFilled(t *testing.T) {
	c, err := Parse([]byte(minimal + "trigger:\n  stages:\n    - {name: hlt1, plugin: x}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Builder.Timeout != time.Second || c.Builder.MemoryBudget != DefaultMemoryBudget || c.HTTP.Address != DefaultHTTPAddress {
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
		c, err := Parse([]byte(minimal + "builder:\n  memory_budget: " + in + "\n"))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if c.Builder.MemoryBudget != want {
			t.Errorf("%s parsed as %d, want %d", in, c.Builder.MemoryBudget, want)
		}
	}
	if s := ByteSize(256 << 20).String(); s != "256MiB" {
		t.Errorf("String = %q", s)
	}
}

// TestValidation: each case's mistakes must all be reported, each naming
// its field path (and, where given, a fragment of the value or expectation).
func TestValidation(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want []string // each must appear in one problem line
		n    int      // exact number of problems
	}{
		{"no inputs no sources", "run: 1\n", []string{"inputs: want at least one input", "sources: want at least one source group"}, 2},
		{"unknown key with its path and the valid keys", minimal + "store:\n  paht: /x\n",
			[]string{`store.paht (line 8): unknown key "paht" (valid keys here: gc_interval, max_bytes, min_free_bytes, path, sync, sync_interval)`}, 1},
		{"unknown key in a list item", minimal + "trigger:\n  stages:\n    - name: a\n      plugn: x\n",
			[]string{`trigger.stages[0].plugn (line 10): unknown key "plugn" (valid keys here: deadline, deferral, instances, name, params, plugin, prescales, when)`,
				"trigger.stages[0].plugin: want the path"}, 2},
		{"wrong types all reported", minimal + "run: many\nbuilder:\n  timeout: 5\n  memory_budget: lots\n",
			[]string{`run (line 7): "many": want a whole number >= 0 (uint32)`, `builder.timeout (line 9): "5": want a duration such as 500ms, 10s or 5m`, `builder.memory_budget (line 10): "lots"`}, 3},
		{"bad uris", `
inputs:
  - uri: tcp://localhost
  - uri: http://x:1
  - uri: shm://a/b
  - uri: udp://h:99999
  - uri: file://
  - uri: udp://h:9?format=mdf
  - uri: udp://h:9?format=vtp
  - uri: udp://h:10?format=vtp&format=mfp
  - uri: tcp://127.0.0.1:0
sources: [{name: a, sources: "1"}]
`, []string{`inputs[0].uri: "tcp://localhost": want tcp://HOST:PORT`, `inputs[1].uri: "http://x:1": unknown scheme "http": want shm://NAME, tcp://HOST:PORT, udp://HOST:PORT[?format=...], file://PATH`,
			"inputs[2].uri", "inputs[3].uri", "inputs[4].uri", `inputs[5].uri: "udp://h:9?format=mdf": format "mdf": want mfp or vtp`,
			`inputs[7].uri: "udp://h:10?format=vtp&format=mfp": option "format" given 2 times`}, 7},
		{"transport keys", `
inputs:
  - uri: tcp://127.0.0.1:7000
    credit_window: 1KiB
    reorder_window: 5
  - uri: udp://127.0.0.1:7001
    latency_budget: 0s
    reorder_window: many
  - uri: shm://r
    socket_buffer: 8MiB
    emulator: {ring_size: 3MiB, connections: 2}
  - uri: tcp://127.0.0.1:0
    emulator: {connections: 2000}
sources: [{name: a, sources: "1"}]
`, []string{"inputs[0].credit_window: 1KiB: want 64KiB..1GiB",
			`inputs[0].reorder_window (line 5): unknown key "reorder_window" (valid keys here: credit_window, emulator, expect_streams, socket_buffer, uri)`,
			"inputs[1].latency_budget: 0s: want a positive duration", `inputs[1].reorder_window (line 8): "many": want a whole number`,
			`inputs[2].socket_buffer (line 10): unknown key "socket_buffer" (valid keys here: emulator, uri)`,
			"inputs[2].emulator.ring_size: 3MiB: want a power of two",
			`inputs[2].emulator.connections (line 11): unknown key "connections" (valid keys here: duration, events, faults, first_event_id, fragment_size, from, loop, packing, rate, ring_size, seed, sources)`,
			"inputs[3].emulator: a sender needs the port its receiver listens on (1..65535), not 0", "inputs[3].emulator.connections: 2000"}, 9},
		{"duplicate input", minimal + "  - uri: tcp://127.0.0.1:7000\n", nil, -1},
		{"groups", `
inputs: [{uri: "shm://r"}]
sources:
  - {name: Velo, sources: "0-3"}
  - {name: ut, sources: "3-5"}
  - {name: ut, sources: "x"}
  - {name: ft, sources: ""}
`, []string{`sources[0].name: "Velo"`, `sources[1].sources: "3-5": want each source in one group only: source 3 is also in sources[0]`,
			`sources[2].name: "ut": want a unique group name`, `sources[2].sources: "x"`, `sources[3].sources: "": want at least one source id`}, 5},
		{"builder", minimal + `
builder:
  mode: timeslices
  timeout: 0s
  batch_events: 0
  memory_budget: 1KiB
  queue_batches: 0
`, []string{`builder.mode: "timeslices": want event or timeslice`, "builder.timeout: 0s", "builder.batch_events: 0", "builder.memory_budget: 1KiB", "builder.queue_batches: 0"}, 5},
		{"timeslice needs a slice", minimal + "builder:\n  mode: timeslice\n  overlap: 5ms\n",
			[]string{"builder.slice_duration", "builder.overlap: 5ms: want 0 <= overlap < slice_duration"}, 2},
		{"stages", minimal + `
trigger:
  stages:
    - name: hlt1
      plugin: bin/plugins/gec
      prescales: {quiet: 0}
      deferral: {fraction: 1.5, backlog: -1}
    - name: hlt1
      instances: 100
      when: later
replay:
  stages: [hlt2]
  rate: -1
`, []string{"trigger.stages[0].prescales.quiet: 0", "trigger.stages[0].deferral.fraction: 1.5", "trigger.stages[0].deferral.backlog: -1",
			`trigger.stages[1].name: "hlt1": want a unique stage name (also trigger.stages[0])`, "trigger.stages[1].plugin: want the path",
			"trigger.stages[1].instances: 100", `trigger.stages[1].when: "later"`, `replay.stages[0]: "hlt2"`, "replay.rate: -1"}, 9},
		{"store http log", minimal + `
store: {path: "", sync: always, max_bytes: 1MiB}
http: {address: "localhost"}
log: {level: verbose, format: xml, rate_interval: 0s}
`, []string{"store.path", `store.sync: "always"`, "store.max_bytes: 1MiB", `http.address: "localhost"`, `log.level: "verbose"`, `log.format: "xml"`, "log.rate_interval"}, 7},
		{"emulator", `
inputs:
  - uri: file://x.mfp
    emulator: {from: a.mdf, events: 10, loop: -1, packing: 70000, faults: {drop: 2, stall: -0.1}}
  - uri: udp://127.0.0.1:9000
    emulator: {fragment_size: {dist: uniform, min: 10, max: 5}, sources: "9-1", ring_size: 3MiB, faults: {drop: 0.5, corrupt: 0.6}}
sources: [{name: a, sources: "1"}]
`, []string{"inputs[0].emulator: an embedded emulator cannot feed a file:// input: it writes to shm://NAME, tcp://HOST:PORT, udp://HOST:PORT[?format=...]", "inputs[0].emulator.loop: -1", "inputs[0].emulator.packing: 70000",
			"inputs[0].emulator.from", "inputs[0].emulator.faults.drop: 2", "inputs[0].emulator.faults.stall: -0.1",
			"inputs[0].emulator.faults: want drop + duplicate + corrupt + truncate <= 1",
			"inputs[1].emulator.fragment_size.max: 5", `inputs[1].emulator.sources: "9-1"`, `inputs[1].emulator.ring_size (line 6): unknown key "ring_size" (valid keys here: duration, events, faults, first_event_id, fragment_size, from, loop, packing, rate, seed, socket_buffer, sources)`,
			"inputs[1].emulator.faults: want drop"}, 11},
		{"valid full", minimal + `
node: {id: n1}
run: 42
builder: {mode: timeslice, slice_duration: 10ms, overlap: 1ms, memory_budget: 1GiB}
trigger:
  stages:
    - {name: hlt1, plugin: p, prescales: {quiet: 10}, deferral: {fraction: 0.25}}
    - {name: hlt2, plugin: q, when: replay}
replay: {stages: [hlt2], inter_fill: 30s}
http: {address: "off"}
`, nil, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if tc.n == 0 {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("want *Error, got %v", err)
			}
			if tc.n > 0 && len(ce.Problems) != tc.n {
				t.Errorf("got %d problems, want %d:\n%v", len(ce.Problems), tc.n, err)
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("missing %q in:\n%s", w, msg)
				}
			}
		})
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
  - uri: tcp://127.0.0.1:7000
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
	if !errors.As(err, &ce) || len(ce.Problems) != 4 {
		t.Fatalf("want 4 problems, got %v", err)
	}
	for _, w := range []string{"trigger.stages[1].plugin", "want an executable file", "trigger.stages[2].plugin", "no such file",
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

// The commented default file documents every key of every transport with
// its default, the input's beside uri and the sender's in the emulator
// section: a transport's default changed in code fails here until the file
// says it too.
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
	for _, w := range []string{"uri: tcp://127.0.0.1:7000\ncredit_window: 1MiB\nsocket_buffer: 8MiB\nexpect_streams: 0\nemulator:\n", "    connections: 3\n    socket_buffer: 4MiB\n"} {
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
