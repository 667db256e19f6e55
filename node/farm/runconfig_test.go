package farm

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func testRunConfig() RunConfig {
	return RunConfig{Schema: RunConfigSchema, Run: 5, Protocol: "pull", Unit: "packets", AssignmentSize: 1, Release: "durable",
		MaxOutstanding: 3, ReleaseGroup: 4,
		Sources: []SourceGroup{{Name: "a", Sources: "0-3"}, {Name: "b", Sources: "10"}},
		Plugins: []Plugin{{Stage: "hlt1", Name: "gec", Digest: "d1", Params: map[string]string{"max": "3"}}}}
}

func TestRunConfigValidate(t *testing.T) {
	if err := testRunConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	em, err := testRunConfig().EMConfig(64, time.Millisecond)
	if err != nil || !reflect.DeepEqual(em, EMConfig{Protocol: Pull, AssignmentSize: 1, Linger: time.Millisecond, MaxOutstanding: 3, Release: OutcomeDurable, BlockSize: 64}) {
		t.Fatalf("EMConfig %+v %v", em, err)
	}
	for field, mod := range map[string]func(*RunConfig){
		"schema":             func(c *RunConfig) { c.Schema = 2 },
		"protocol":           func(c *RunConfig) { c.Protocol = "both" },
		"unit":               func(c *RunConfig) { c.Unit = "slices" },
		"release":            func(c *RunConfig) { c.Release = "returned" },
		"assignment_size":    func(c *RunConfig) { c.AssignmentSize = 0 },
		"max_outstanding":    func(c *RunConfig) { c.MaxOutstanding = 0 },
		"release_group":      func(c *RunConfig) { c.ReleaseGroup = 0 },
		"sources":            func(c *RunConfig) { c.Sources = nil },
		"sources[1].name":    func(c *RunConfig) { c.Sources[1].Name = "a" },
		"sources[0].sources": func(c *RunConfig) { c.Sources[0].Sources = "x" },
	} {
		c := testRunConfig()
		mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), field+":") {
			t.Errorf("%s: error %v does not name the field", field, err)
		}
	}
}

func TestDiff(t *testing.T) {
	a, b := testRunConfig(), testRunConfig()
	if d := Diff(a, b); len(d) != 0 {
		t.Fatalf("equal configs differ: %v", d)
	}
	b.Sources = []SourceGroup{{Name: "b", Sources: "10"}, {Name: "a", Sources: "0,1,2,3"}}
	b.Plugins = []Plugin{{Stage: "hlt2", Name: "x"}, {Stage: "hlt1", Name: "gec", Digest: "d1", Params: map[string]string{"max": "4", "min": "1"}}}
	b.Prescales = map[string]map[string]uint32{"hlt1": {"mb": 2}}
	want := []string{
		"sources (groups in order): farm has [a b], this node [b a]",
		"plugins[hlt1].params[max]: farm has \"3\", this node \"4\"",
		"plugins[hlt1].params[min]: farm has none, this node \"1\"",
		"plugins[hlt2]: farm has no such stage, this node x",
		"prescales[hlt1][mb]: farm has none, this node 1 in 2",
	}
	if d := Diff(a, b); !reflect.DeepEqual(d, want) {
		t.Fatalf("diff\n%s\nwant\n%s", strings.Join(d, "\n"), strings.Join(want, "\n"))
	}
	if err := Mismatch(a, b); !errors.Is(err, ErrConfigMismatch) || !strings.Contains(err.Error(), "run 5") {
		t.Fatalf("mismatch error %v", err)
	}
}
