package config

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The default split leaves the Go heap its part of every budget the
// validation accepts, and the parts add up to the budget exactly.
func TestDefaultMemorySplitAddsUp(t *testing.T) {
	for _, b := range []ByteSize{64 << 20, 256 << 20, 512 << 20, 8 << 30} {
		c := Default()
		c.Node.MemoryBudget = b
		c.Inputs[0].Emulator.Sender = nil // no ring: only the split is checked here
		p := c.Memory()
		if sum := p.Builder + p.Batches + p.Inputs + p.Store + p.Heap; sum != uint64(b) {
			t.Errorf("budget %s: parts add up to %d", b, sum)
		}
		if p.Heap < minHeap && b >= 128<<20 {
			t.Errorf("budget %s: heap %d below %d", b, p.Heap, minHeap)
		}
	}
}

// The default configuration's plan: the ring (64MiB) within the inputs'
// part, and Go's limit the budget less the arena-free shared and mapped
// memory (no stages: the arena is not created), the ring twice: its
// embedded emulator maps it in the node's process as the input does.
func TestDefaultMemoryPlan(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	p := c.Memory()
	b := uint64(512 << 20)
	if p.Budget != b || p.Builder != Percent(15).Of(b) || p.Batches != b/4 || p.Inputs != uint64(80530637) || p.InputsUsed != 64<<20 || p.RingsMappedTwice != 64<<20 {
		t.Fatalf("plan %+v", p)
	}
	mapped := uint64(c.Store.WithMemory(int64(p.Store)).MappedBound())
	if want := b - 2*64<<20 - mapped; p.GoMemLimit != want {
		t.Errorf("GoMemLimit %d, want %d (mapped %d)", p.GoMemLimit, want, mapped)
	}
}

func TestShareYAML(t *testing.T) {
	for in, want := range map[string]Share{"25%": {Frac: 0.25}, `"12.5 %"`: {Frac: 0.125}, "64MiB": {Bytes: 64 << 20}, "1048576": {Bytes: 1 << 20}} {
		var s Share
		if err := yaml.Unmarshal([]byte(in), &s); err != nil || s != want {
			t.Errorf("%s: %+v, %v", in, s, err)
		}
		out, _ := yaml.Marshal(s)
		var back Share
		if err := yaml.Unmarshal(out, &back); err != nil || back != want {
			t.Errorf("%s: round trip %q gave %+v, %v", in, out, back, err)
		}
	}
	for _, in := range []string{"0%", "101%", "-5%", "x%", "lots"} {
		var s Share
		if err := yaml.Unmarshal([]byte(in), &s); err == nil {
			t.Errorf("%s accepted as %+v", in, s)
		}
	}
	if got := Percent(15).Of(1000); got != 150 {
		t.Errorf("15%% of 1000 = %d", got)
	}
}

// A peer input's receive pool is part of the inputs share and, being
// mmap'd, outside Go's limit: the default pool fits the default share, a
// larger one is refused naming pool (it once went uncounted: a 256 MiB pool
// beside a 77 MiB share).
func TestPeerInputPoolInBudget(t *testing.T) {
	cfg := func(pool string) string {
		return `
inputs:
  - uri: peer://127.0.0.1:0?transport=tcp
` + pool + `
sources: [{name: a, sources: "0-15"}]
`
	}
	c, err := Parse([]byte(cfg("")))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Memory()
	mapped := uint64(c.Store.WithMemory(int64(p.Store)).MappedBound())
	if p.InputsUsed != 64<<20 || p.GoMemLimit != p.Budget-64<<20-mapped {
		t.Errorf("inputs used %d, GoMemLimit %d: want the 64MiB pool in both", p.InputsUsed, p.GoMemLimit)
	}
	_, err = Parse([]byte(cfg("    pool: 256MiB")))
	if err == nil || !strings.Contains(err.Error(), "node.memory_split.inputs") || !strings.Contains(err.Error(), "inputs[0] 256MiB") || !strings.Contains(err.Error(), "pool") {
		t.Errorf("256MiB pool in a 77MiB inputs share: %v", err)
	}
}

// node.memory_split takes fractions as the README says (0.15 and "0.3" were
// read as byte sizes of 0 and refused as "0"), and a refusal names the value
// written.
func TestMemorySplitFractions(t *testing.T) {
	cfg := func(builder string) string {
		return "node: {memory_budget: 512MiB, memory_split: {builder: " + builder + "}}\n" +
			"inputs: [{uri: \"tcp://127.0.0.1:0\"}]\nsources: [{name: a, sources: \"0-3\"}]\n"
	}
	for in, want := range map[string]uint64{"0.15": Percent(15).Of(512 << 20), `"0.3"`: Share{Frac: 0.3}.Of(512 << 20), "1.0": 512 << 20, `"10%"`: Percent(10).Of(512 << 20), "64MiB": 64 << 20} {
		c, err := Parse([]byte(cfg(in)))
		if in == "1.0" { // the whole budget: refused, as the parts then exceed it
			if err == nil || !strings.Contains(err.Error(), "node.memory_split") {
				t.Errorf("builder %s: %v", in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("builder %s: %v", in, err)
			continue
		}
		if got := c.Memory().Builder; got != want {
			t.Errorf("builder %s: %d bytes, want %d", in, got, want)
		}
	}
	for _, in := range []string{"1.5", "-0.2", "0.0", `"x%"`} {
		_, err := Parse([]byte(cfg(in)))
		if err == nil || !strings.Contains(err.Error(), `"`+strings.Trim(in, `"`)+`"`) {
			t.Errorf("builder %s: %v, want a refusal naming it", in, err)
		}
	}
}

// The least budget holds the fixed memory and each part's minimum, the
// inputs' at least what they create, an embedded emulator's ring once more
// (the process maps it twice), and a budget below it is refused naming the
// minimum and its parts.
func TestMinimumBudget(t *testing.T) {
	c := Default() // a 64MiB ring its embedded emulator writes
	f := FixedMemory{Executable: 60 << 20, Runtime: RuntimeFloor}
	min, what := c.MinimumBudget(f)
	if want := uint64(60<<20 + RuntimeFloor + 4<<20 + 4<<20 + 64<<20 + 16<<20 + minHeap + 64<<20); min != want {
		t.Errorf("minimum %d, want %d (%s)", min, want, what)
	}
	// A ring another process writes is mapped once: no second mapping.
	other := Default()
	other.Inputs[0].Emulator = nil
	if p := other.Memory(); p.RingsMappedTwice != 0 {
		t.Errorf("no emulator: rings mapped twice %d, want 0", p.RingsMappedTwice)
	}
	if min, what := other.MinimumBudget(f); min != uint64(60<<20+RuntimeFloor+4<<20+4<<20+minInputs+16<<20+minHeap) || strings.Contains(what, "mapped again") {
		t.Errorf("no emulator: minimum %d (%s)", min, what)
	}
	if err := c.CheckMemoryMinimum(f); err != nil { // 512MiB
		t.Errorf("512MiB: %v", err)
	}
	c.Node.MemoryBudget = 256 << 20
	err := c.CheckMemoryMinimum(f)
	if err == nil || !strings.Contains(err.Error(), "want at least 340MiB") || !strings.Contains(err.Error(), "this executable's mapped pages 60MiB") ||
		!strings.Contains(err.Error(), "inputs (what they create) 64MiB") || !strings.Contains(err.Error(), "the embedded emulators' rings mapped again 64MiB") {
		t.Errorf("256MiB with a 64MiB ring: %v", err)
	}
	if m := MeasureFixedMemory(); m.Executable == 0 || m.Runtime != RuntimeFloor {
		t.Errorf("measured %+v", m)
	}
}
