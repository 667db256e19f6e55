package conf

import (
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

type knobs struct {
	Window  ByteSize      `yaml:"window"`
	Count   int           `yaml:"count"`
	Budget  time.Duration `yaml:"budget"`
	Ignored string        `yaml:"-"`
}

// keysOf decodes a YAML mapping into its keys' nodes, as a struct with an
// inline map of yaml.Node collects the keys it does not know.
func keysOf(t *testing.T, doc string) map[string]yaml.Node {
	var m map[string]yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestDecode(t *testing.T) {
	k := knobs{Window: 8 << 20, Count: 3}
	ps := Decode(&k, keysOf(t, "window: 1MiB\nbudget: 5ms\n"))
	if len(ps) != 0 || k.Window != 1<<20 || k.Budget != 5*time.Millisecond || k.Count != 3 {
		t.Fatalf("decoded %+v, problems %v", k, ps)
	}
	ps = Decode(&k, keysOf(t, "count: many\nwindw: 1\nbudget: 5\nwindow: lots\nIgnored: x\n"), "uri")
	want := []string{
		`count (line 1): "many": want a whole number`,
		`windw (line 2): unknown key "windw" (valid keys here: budget, count, uri, window)`,
		`budget (line 3): "5": want a duration such as 500ms, 10s or 5m`,
		`window (line 4): "lots": want a byte size`,
		`Ignored (line 5): unknown key "Ignored"`,
	}
	if len(ps) != len(want) {
		t.Fatalf("got %d problems, want %d: %v", len(ps), len(want), ps)
	}
	for i, w := range want {
		if !strings.HasPrefix(ps[i].String(), w) {
			t.Errorf("problem %d = %q, want it to start %q", i, ps[i], w)
		}
	}
	if got := ps[:2].In("inputs[2]"); got[0].Path != "inputs[2].count" || got[1].Path != "inputs[2].windw" || ps[0].Path != "count" {
		t.Errorf("Under: %v (original %v)", got, ps[:2])
	}
	if got := (Problems{{Path: ""}}).In("inputs[0].emulator"); got[0].Path != "inputs[0].emulator" {
		t.Errorf("Under of the mapping itself: %q", got[0].Path)
	}
	var none struct{}
	if ps := Decode(&none, keysOf(t, "x: 1\n")); len(ps) != 1 || !strings.Contains(ps[0].Expected, "takes no other keys") {
		t.Errorf("a struct without keys: %v", ps)
	}
}

// TestDecodeBool: what the message for a bool says is read is read, and
// what it says is refused is refused.
func TestDecodeBool(t *testing.T) {
	var k struct {
		Direct bool `yaml:"direct"`
	}
	for _, v := range []string{"true", "yes", "on", "TRUE", "Yes"} {
		k.Direct = false
		if ps := Decode(&k, keysOf(t, "direct: "+v+"\n")); len(ps) != 0 || !k.Direct {
			t.Errorf("direct: %s: %v, problems %v", v, k.Direct, ps)
		}
	}
	for _, v := range []string{"no", "off", "false"} {
		k.Direct = true
		if ps := Decode(&k, keysOf(t, "direct: "+v+"\n")); len(ps) != 0 || k.Direct {
			t.Errorf("direct: %s: %v, problems %v", v, k.Direct, ps)
		}
	}
	for _, v := range []string{"maybe", "1", `"true"`} {
		ps := Decode(&k, keysOf(t, "direct: "+v+"\n"))
		if len(ps) != 1 || !strings.Contains(ps[0].String(), "want true or false, unquoted (yes/no and on/off are read as true/false too)") {
			t.Errorf("direct: %s: problems %v", v, ps)
		}
	}
}
