package config

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/storage"
)

// RuntimeFloor is what the Go runtime and the node's own machinery hold on
// top of the parts' minimums whatever the split: goroutine stacks, the
// runtime's metadata, the garbage the soft limit (GOMEMLIMIT) lets grow
// past it, the plugin host's and the store's working buffers. Measured
// with `sluice bench`: anonymous + shared memory peaked at 195-207MiB
// with budgets of 197MiB and 256MiB alike (a lower Go limit did not lower
// it), so below about 200MiB a budget cannot hold.
const RuntimeFloor = 96 << 20

// FixedMemory is what a sluice process holds besides the budget's parts:
// its executable's file-backed pages (the text and data the kernel maps,
// all of which the node's paths touch) and the runtime's floor. Bytes.
type FixedMemory struct {
	Executable uint64
	Runtime    uint64
}

// MeasureFixedMemory sizes this process's fixed memory: the executable's
// mappings in /proc/self/maps (their whole length: they become resident as
// the code runs), else the executable file's size; 0 where neither can be
// read (not Linux).
func MeasureFixedMemory() FixedMemory {
	f := FixedMemory{Runtime: RuntimeFloor}
	exe, err := os.Executable()
	if err != nil {
		return f
	}
	if m, err := os.Open("/proc/self/maps"); err == nil {
		defer m.Close()
		sc := bufio.NewScanner(m)
		for sc.Scan() {
			// start-end perms offset dev inode path
			fs := strings.Fields(sc.Text())
			if len(fs) < 6 || fs[5] != exe {
				continue
			}
			lo, hi, ok := strings.Cut(fs[0], "-")
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			if ok && err1 == nil && err2 == nil && b > a {
				f.Executable += b - a
			}
		}
	}
	if f.Executable == 0 {
		if st, err := os.Stat(exe); err == nil {
			f.Executable = uint64(st.Size())
		}
	}
	return f
}

// MinimumBudget is the least node.memory_budget that holds the fixed
// memory and every part at its minimum (the inputs' part at least what the
// inputs create), plus the rings embedded emulators map a second time in
// the process (MemoryPlan.RingsMappedTwice), and what it is made of, for a
// message.
func (c *Config) MinimumBudget(f FixedMemory) (uint64, string) {
	p := c.Memory()
	inputs := max(uint64(minInputs), p.InputsUsed)
	parts := []struct {
		name string
		n    uint64
	}{
		{"this executable's mapped pages", f.Executable},
		{"the Go runtime's floor", f.Runtime},
		{"builder", minBuilder},
		{"batches", minBatches},
		{"inputs (what they create)", inputs},
		{"store", storage.MinMemoryBytes},
		{"Go heap", minHeap},
	}
	if p.Farm > 0 {
		parts = append(parts, struct {
			name string
			n    uint64
		}{"farm", p.farmMinimum()})
	}
	if p.RingsMappedTwice > 0 {
		parts = append(parts, struct {
			name string
			n    uint64
		}{"the embedded emulators' rings mapped again", p.RingsMappedTwice})
	}
	var sum uint64
	var what []string
	for _, pt := range parts {
		sum += pt.n
		what = append(what, pt.name+" "+size(pt.n))
	}
	return sum, strings.Join(what, " + ")
}

// CheckMemoryMinimum refuses a node.memory_budget below MinimumBudget,
// naming the minimum and what it is made of.
func (c *Config) CheckMemoryMinimum(f FixedMemory) error {
	min, what := c.MinimumBudget(f)
	if b := uint64(c.Node.MemoryBudget); b < min {
		var ps conf.Problems
		ps.Add("node.memory_budget", c.Node.MemoryBudget, "want at least %s, the memory this process holds whatever the split: %s", size(roundMiB(min)), what)
		return errOf("", ps)
	}
	return nil
}

// StoreMinimumBudget is the least --memory-budget of a `sluice store`
// command: the fixed memory, the store's minimum and the Go heap's (the
// decoded batches of an export).
func StoreMinimumBudget(f FixedMemory) (uint64, string) {
	min := f.Executable + f.Runtime + storage.MinMemoryBytes + minHeap
	return roundMiB(min), fmt.Sprintf("this executable's mapped pages %s + the Go runtime's floor %s + store %s + Go heap %s",
		size(f.Executable), size(f.Runtime), size(storage.MinMemoryBytes), size(minHeap))
}

// roundMiB rounds n up to a whole MiB.
func roundMiB(n uint64) uint64 { return (n + 1<<20 - 1) &^ (1<<20 - 1) }
