package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/node/farm"
	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/node/transport/shm"
	"github.com/sluice-daq/sluice/storage"
)

// MemorySplit says how node.memory_budget is shared among the parts that
// hold the node's memory. Each part is a Share: a fraction of the budget
// ("15%") or a size ("64MiB"). The Go heap's part, unset, is what the
// others leave.
type MemorySplit struct {
	// Builder bounds the payload bytes the builder's open events reference
	// (builder.Config.MaxBufferedBytes). They lie in the input's buffers
	// (a ring's slots, socket receive buffers), so this bounds how much of
	// the inputs' memory the builder can pin.
	Builder Share `yaml:"builder"`
	// Batches is the plugin arena (shared memory the builder builds batches
	// in and every plugin maps); half of it bounds the batch bytes between
	// the builder and the store (the queue, the stages, the store's
	// writes), the other half is for the batches being built and the
	// stages' selections.
	Batches Share `yaml:"batches"`
	// Inputs bounds what the inputs and their embedded emulators create on
	// the node: readout rings (ring_size) and socket receive buffers
	// (credit_window per expected stream); their sum must fit.
	Inputs Share `yaml:"inputs"`
	// Store is the event store's memory: badger's memtables, caches,
	// resident pages of its mapped files and the cursors' buffer pool
	// (storage.Options.MemoryBytes).
	Store Share `yaml:"store"`
	// Farm (a farm node only: farm.id set) is the peer transport's memory:
	// the RU's send pool (registered buffers its data messages to the BUs
	// go out of) and the BU's receive pool (what the RUs' data for its
	// assignments arrives in, kept until its builder copied it), both
	// mmap'd. A folded node (roles: both) gives each half, a one-role node
	// its pool all of it. What an RU holds for unreleased assignments lies
	// in its inputs' rings and windows (the inputs part). Unset in a farm:
	// DefaultFarmShare.
	Farm Share `yaml:"farm"`
	// Heap is the Go heap beyond the parts above (plugin calls, decoded
	// batches, badger's bookkeeping, the runtime); 0: the rest.
	Heap Share `yaml:"heap"`
}

// DefaultFarmShare is a farm node's farm part when node.memory_split
// names none (with the default split's other parts the Go heap keeps 15 %).
var DefaultFarmShare = Percent(15)

// The least the builder's, the batches' and the inputs' parts may be.
const (
	minBuilder = 4 << 20
	minBatches = 4 << 20
	minInputs  = 1 << 20
)

// minFarmPool is the least each farm pool may be: room for a few data
// messages (an RU's part of one assignment each).
const minFarmPool = 8 << 20

// DefaultMemorySplit is the split of a budget when the config says none.
func DefaultMemorySplit() MemorySplit {
	return MemorySplit{Builder: Percent(15), Batches: Percent(25), Inputs: Percent(15), Store: Percent(15)}
}

// Share is part of the memory budget: a fraction (Frac, 0..1) or a size
// (Bytes); zero: unset. In YAML "25%" or a byte size ("64MiB").
type Share struct {
	Frac  float64
	Bytes conf.ByteSize
}

// Percent is a share of p percent.
func Percent(p float64) Share { return Share{Frac: p / 100} }

// Of is the share's bytes out of budget.
func (s Share) Of(budget uint64) uint64 {
	if s.Frac > 0 {
		return uint64(math.Round(s.Frac * float64(budget)))
	}
	return uint64(s.Bytes)
}

func (s Share) zero() bool { return s.Frac == 0 && s.Bytes == 0 }

// String is "25%" or the size.
func (s Share) String() string {
	if s.Frac > 0 {
		return strconv.FormatFloat(s.Frac*100, 'f', -1, 64) + "%"
	}
	return s.Bytes.String()
}

// UnmarshalYAML accepts "N%" (0 < N <= 100), a fraction written with a
// decimal point (0 < f <= 1: "0.15" is 15 %) or a byte size ("64MiB",
// 67108864; 0: unset). Anything else is refused naming the value written.
func (s *Share) UnmarshalYAML(n *yaml.Node) error {
	bad := func(why string) error {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf(
			"line %d: cannot unmarshal `%s` into a share of the memory budget such as \"25%%\", 0.25 or \"64MiB\"%s", n.Line, n.Value, why)}}
	}
	if n.Kind != yaml.ScalarNode {
		return bad("")
	}
	v := strings.TrimSpace(n.Value)
	if pc, ok := strings.CutSuffix(v, "%"); ok {
		p, err := strconv.ParseFloat(strings.TrimSpace(pc), 64)
		if err != nil || !(p > 0 && p <= 100) {
			return bad(" (a percentage: more than 0, at most 100)")
		}
		*s = Share{Frac: p / 100}
		return nil
	}
	if strings.Contains(v, ".") {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			if !(f > 0 && f <= 1) {
				return bad(" (a fraction: more than 0, at most 1)")
			}
			*s = Share{Frac: f}
			return nil
		}
	}
	var b conf.ByteSize
	if err := b.UnmarshalYAML(n); err != nil {
		return bad("")
	}
	*s = Share{Bytes: b}
	return nil
}

// MarshalYAML writes String.
func (s Share) MarshalYAML() (any, error) { return s.String(), nil }

// MemoryPlan is the budget resolved into bytes per part.
type MemoryPlan struct {
	Budget  uint64 `json:"budget_bytes"`
	Builder uint64 `json:"builder_bytes"`
	Batches uint64 `json:"batches_bytes"`
	Inputs  uint64 `json:"inputs_bytes"`
	Store   uint64 `json:"store_bytes"`
	Heap    uint64 `json:"heap_bytes"`
	// Farm is the farm part (0: not a farm node), FarmSend the RU's send
	// pool and FarmReceive the BU's receive pool out of it.
	Farm        uint64 `json:"farm_bytes,omitempty"`
	FarmSend    uint64 `json:"farm_send_bytes,omitempty"`
	FarmReceive uint64 `json:"farm_receive_bytes,omitempty"`
	// InputsUsed is what the inputs are configured to create (rings,
	// receive windows), within Inputs.
	InputsUsed uint64 `json:"inputs_configured_bytes"`
	// RingsMappedTwice is the bytes of the rings embedded emulators write
	// to shm:// inputs of the same node: the process maps each twice (the
	// emulator's mapping and the input's), and its resident figures
	// (VmRSS, VmHWM) count every mapping. Outside the Go heap and the
	// parts, like the fixed memory.
	RingsMappedTwice uint64 `json:"rings_mapped_twice_bytes,omitempty"`
	// GoMemLimit is the Go runtime's soft limit `sluice run` sets: the
	// budget less what lies outside the Go heap (the plugin arena, the
	// rings, the store's mapped files).
	GoMemLimit uint64 `json:"go_memory_limit_bytes"`
}

// farmMinimum is the least the farm's part may be: minFarmPool for each
// of its pools (send and receive, or the one a role has).
func (p MemoryPlan) farmMinimum() uint64 {
	if p.FarmSend > 0 && p.FarmReceive > 0 {
		return 2 * minFarmPool
	}
	return minFarmPool
}

// minHeap is the least the Go heap's part may be: the runtime, the HTTP
// server, plugin calls and badger's bookkeeping need about this much.
const minHeap = 32 << 20

// Memory resolves the budget's split (call after Validate succeeded).
func (c *Config) Memory() MemoryPlan {
	b := uint64(c.Node.MemoryBudget)
	s := c.Node.MemorySplit
	p := MemoryPlan{Budget: b, Builder: s.Builder.Of(b), Batches: s.Batches.Of(b), Inputs: s.Inputs.Of(b), Store: s.Store.Of(b)}
	c.farmMemory(&p)
	fixed := p.Builder + p.Batches + p.Inputs + p.Store + p.Farm
	if s.Heap.zero() {
		if fixed < b {
			p.Heap = b - fixed
		}
	} else {
		p.Heap = s.Heap.Of(b)
	}
	var shared uint64 // rings: shared memory, outside the Go heap
	for _, in := range c.Inputs {
		u := inputMemory(in)
		p.InputsUsed += u.total
		shared += u.shared
		p.RingsMappedTwice += u.twice
	}
	// The farm's pools are mmap'd: outside the Go heap too.
	outside := shared + p.RingsMappedTwice + uint64(c.Store.WithMemory(int64(p.Store)).MappedBound()) + p.Farm
	if len(c.OnlineStages()) > 0 || c.Replay.InterFill > 0 {
		outside += p.Batches
	}
	if outside < b {
		p.GoMemLimit = b - outside
	}
	return p
}

// farmMemory sets the farm part and its pools: a farm node's share
// (DefaultFarmShare when unset), split between the RU's send pool and the
// BU's receive pool by roles.
func (c *Config) farmMemory(p *MemoryPlan) {
	if !c.Farm.Enabled() {
		return
	}
	sh := c.Node.MemorySplit.Farm
	if sh.zero() {
		sh = DefaultFarmShare
	}
	p.Farm = sh.Of(p.Budget)
	roles, err := c.Farm.ParsedRoles()
	switch {
	case err != nil:
	case roles&farm.RoleRU != 0 && roles&farm.RoleBU != 0:
		p.FarmSend = p.Farm / 2
		p.FarmReceive = p.Farm - p.FarmSend
	case roles&farm.RoleRU != 0:
		p.FarmSend = p.Farm
	case roles&farm.RoleBU != 0:
		p.FarmReceive = p.Farm
	}
}

// inputMem is what one input creates: in all, of it shared memory, and
// of that what the process maps a second time (RingsMappedTwice).
type inputMem struct{ total, shared, twice uint64 }

// inputMemory is what one input and its emulator create on the node.
func inputMemory(in Input) inputMem {
	var m inputMem
	if mb, ok := in.Options.(transport.Memory); ok {
		n := uint64(mb.MemoryBytes())
		m.total += n
		if mb.SharedMemory() { // a peer input's receive pool
			m.shared += n
		}
	}
	if in.Emulator != nil {
		if mb, ok := in.Emulator.Sender.(transport.Memory); ok {
			n := uint64(mb.MemoryBytes())
			m.total += n
			if mb.SharedMemory() {
				m.shared += n
			}
			// The shm:// input maps the ring its emulator created and maps.
			if _, ok := in.Emulator.Sender.(*shm.SenderOptions); ok {
				m.twice += n
			}
		}
	}
	return m
}

func (c *Config) validateMemory(ps *conf.Problems) {
	b := uint64(c.Node.MemoryBudget)
	if b < 64<<20 {
		ps.Add("node.memory_budget", c.Node.MemoryBudget, "want at least 64MiB")
		return
	}
	s := c.Node.MemorySplit
	p := c.Memory()
	parts := []struct {
		key   string
		share Share
		bytes uint64
		min   uint64
	}{
		{"builder", s.Builder, p.Builder, minBuilder},
		{"batches", s.Batches, p.Batches, minBatches},
		{"inputs", s.Inputs, p.Inputs, minInputs},
		{"store", s.Store, p.Store, storage.MinMemoryBytes},
	}
	if c.Farm.Enabled() {
		farmMin := p.farmMinimum()
		sh := s.Farm
		if sh.zero() {
			sh = DefaultFarmShare
		}
		parts = append(parts, struct {
			key   string
			share Share
			bytes uint64
			min   uint64
		}{"farm", sh, p.Farm, farmMin})
	} else if !s.Farm.zero() {
		ps.Add("node.memory_split.farm", s.Farm, "want it only in a farm node (farm.id set): it is the peer transport's pools")
	}
	var sum uint64
	for _, pt := range parts {
		path := "node.memory_split." + pt.key
		switch {
		case pt.share.zero():
			ps.Add(path, pt.share, "want a share of the memory budget, such as \"15%%\", 0.15 or \"64MiB\"")
		case pt.bytes > b:
			ps.Add(path, pt.share, "want at most the memory budget (%s)", c.Node.MemoryBudget)
		case pt.bytes < pt.min:
			ps.Add(path, pt.share, "want at least %s (it is %s of %s)", conf.ByteSize(pt.min), size(pt.bytes), c.Node.MemoryBudget)
		}
		sum += pt.bytes
	}
	if !s.Heap.zero() {
		sum += p.Heap
	}
	switch {
	case sum > b:
		ps.Add("node.memory_split", splitString(p, !s.Heap.zero()), "want parts that add up to at most the memory budget (%s), not %s",
			c.Node.MemoryBudget, size(sum))
	case p.Heap < minHeap:
		ps.Add("node.memory_split.heap", size(p.Heap), "want at least %s for the Go heap: give the other parts less or the budget more",
			conf.ByteSize(minHeap))
	}
	// Inputs with problems of their own are fixed first: their sizes may
	// be what is wrong.
	if p.InputsUsed > p.Inputs && !anyUnder(*ps, "inputs") {
		ps.Add("node.memory_split.inputs", s.Inputs, "want room for what the inputs create (%s: %s): a larger share, or a smaller ring_size, credit_window, reorder_window, max_datagram, pool or send_ring",
			size(p.InputsUsed), c.inputsMemoryList())
	}
}

func splitString(p MemoryPlan, heap bool) string {
	s := fmt.Sprintf("builder %s + batches %s + inputs %s + store %s", size(p.Builder), size(p.Batches), size(p.Inputs), size(p.Store))
	if p.Farm > 0 {
		s += " + farm " + size(p.Farm)
	}
	if heap {
		s += " + heap " + size(p.Heap)
	}
	return s
}

// size is n in binary units, exact when it can be, else to 0.1 MiB.
func size(n uint64) string {
	if n%(1<<20) == 0 || n < 1<<20 {
		return conf.ByteSize(n).String()
	}
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + "MiB"
}

// inputsMemoryList names what each input creates, for a problem message.
func (c *Config) inputsMemoryList() string {
	var parts []string
	for i, in := range c.Inputs {
		if u := inputMemory(in); u.total > 0 {
			parts = append(parts, fmt.Sprintf("inputs[%d] %s", i, size(u.total)))
		}
	}
	return strings.Join(parts, ", ")
}

// anyUnder reports whether a problem lies under the section path prefix.
func anyUnder(ps conf.Problems, prefix string) bool {
	for _, p := range ps {
		if strings.HasPrefix(p.Path, prefix) {
			return true
		}
	}
	return false
}
