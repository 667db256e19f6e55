package node

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime/metrics"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-daq/sluice/internal/texttable"
	"github.com/sluice-daq/sluice/storage"
)

// MemoryStatus is the memory budget's split (node.memory_split resolved)
// and the peak each part reached, in /status and the ledger.
type MemoryStatus struct {
	BudgetBytes uint64 `json:"budget_bytes"`
	// GoMemLimitBytes is the Go runtime's soft limit `sluice run` and
	// `sluice replay` set (unless GOMEMLIMIT does): the budget less what
	// lies outside the Go heap, so the heap's share plus the parts that
	// live on the Go heap (the store's memtables and caches, socket
	// inputs' receive buffers). The heap part's peak, all the Go
	// runtime's memory, is kept within this, not within the heap's share.
	GoMemLimitBytes uint64       `json:"go_memory_limit_bytes"`
	Parts           []MemoryPart `json:"parts"`
	// PeakResidentBytes is the node process's VmHWM: everything resident
	// at its peak, shared memory and mapped files included (the plugin
	// processes' own memory is theirs).
	PeakResidentBytes uint64 `json:"peak_resident_bytes"`
}

// MemoryPart is one part of the split: its bound and its peak (sampled
// every memorySamplePeriod where it is not counted exactly).
type MemoryPart struct {
	Name       string `json:"name"`
	BoundBytes uint64 `json:"bound_bytes"`
	// PeakBytes is, per part: builder, the inputs' bytes handed to it and
	// not yet released; batches, the highest of the arena's touched bytes
	// and the batch bytes between builder and store; inputs, what they
	// create (rings, receive windows); store, the resident pages of its
	// mapped files (its memtables and caches are within their sizes, on
	// the Go heap); heap, the Go runtime's memory. Every part's bound is
	// its share of the split, so the bounds add up to the budget; the
	// heap's peak also counts what of the other parts lives on the Go heap
	// and is bounded by MemoryStatus.GoMemLimitBytes.
	PeakBytes uint64 `json:"peak_bytes"`
}

// memorySamplePeriod is how often the sampled peaks are read.
const memorySamplePeriod = 50 * time.Millisecond

// memoryPeaks holds the sampled peaks of a run.
type memoryPeaks struct {
	mu      sync.Mutex
	builder uint64
	heap    uint64
	// farmReceive: the BU's bytes of assignments in flight (its receive
	// pool's slots and the copies of its own RU's data); farmHeld: the
	// bytes the RU holds for unreleased assignments.
	farmReceive, farmHeld uint64
}

// sampleMemory reads the sampled parts until stop is closed.
func (n *Node) sampleMemory(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(memorySamplePeriod)
	defer t.Stop()
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	for {
		n.mu.Lock()
		in, fn := n.inputs, n.farm
		n.mu.Unlock()
		if fn != nil {
			fn.sampleMemory(&n.peaks)
		}
		var held uint64
		if in != nil {
			for _, tr := range in.trackers {
				if h := tr.in.Stats().HeldBytes; h > 0 {
					held += uint64(h)
				}
			}
		}
		metrics.Read(s)
		heap := s[0].Value.Uint64() - s[1].Value.Uint64()
		n.peaks.mu.Lock()
		n.peaks.builder = max(n.peaks.builder, held)
		n.peaks.heap = max(n.peaks.heap, heap)
		n.peaks.mu.Unlock()
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// memoryStatus is the split with the peaks so far.
func (n *Node) memoryStatus(parts *Parts) *MemoryStatus {
	p := n.cfg.Memory()
	n.peaks.mu.Lock()
	builderPeak, heapPeak := n.peaks.builder, n.peaks.heap
	n.peaks.mu.Unlock()
	batches := uint64(max(n.gate.peakHeld(), 0))
	var store uint64
	if parts != nil {
		if parts.Arena != nil {
			batches = max(batches, uint64(parts.Arena.HighWater()))
		}
		if m, ok := parts.Store.(interface{ Memory() storage.MemoryStats }); ok {
			// The resident pages of its mapped files at their peak, and
			// its staging buffer; its memtables and caches are on the Go
			// heap (the heap's row).
			ms := m.Memory()
			store = uint64(ms.MappedPeakBytes + ms.StagingBytes)
		}
	}
	m := &MemoryStatus{
		BudgetBytes: p.Budget, GoMemLimitBytes: p.GoMemLimit,
		Parts: []MemoryPart{
			{Name: "builder", BoundBytes: p.Builder, PeakBytes: builderPeak},
			{Name: "batches", BoundBytes: p.Batches, PeakBytes: batches},
			{Name: "inputs", BoundBytes: p.Inputs, PeakBytes: p.InputsUsed},
			{Name: "store", BoundBytes: p.Store, PeakBytes: store},
			{Name: "heap", BoundBytes: p.Heap, PeakBytes: heapPeak},
		},
		PeakResidentBytes: procStatusBytes("VmHWM"),
	}
	if p.Farm > 0 {
		n.mu.Lock()
		fn := n.farm
		n.mu.Unlock()
		var send uint64
		if fn != nil {
			send = uint64(fn.agent.Load().Status().SendPool.PeakBytes)
		}
		n.peaks.mu.Lock()
		recv, held := n.peaks.farmReceive, n.peaks.farmHeld
		n.peaks.mu.Unlock()
		m.Parts = append(m.Parts,
			MemoryPart{Name: "farm send", BoundBytes: p.FarmSend, PeakBytes: send},
			MemoryPart{Name: "farm receive", BoundBytes: p.FarmReceive, PeakBytes: recv},
			// Within the inputs' part: the RU holds packets in its rings.
			MemoryPart{Name: "farm held (in inputs)", BoundBytes: p.InputsUsed, PeakBytes: held})
	}
	return m
}

// procStatusBytes reads a "kB" figure of /proc/self/status (0 when it
// cannot: not Linux).
func procStatusBytes(field string) uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	prefix := []byte(field + ":")
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), prefix); ok {
			fs := bytes.Fields(v)
			if len(fs) > 0 {
				kb, _ := strconv.ParseUint(string(fs[0]), 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// sampleHeap samples the Go runtime's memory (what the heap part counts)
// every memorySamplePeriod until the returned stop is called, which
// returns the peak in bytes.
func sampleHeap() (stop func() uint64) {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	var peak uint64
	read := func() {
		metrics.Read(s)
		peak = max(peak, s[0].Value.Uint64()-s[1].Value.Uint64())
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(memorySamplePeriod)
		defer t.Stop()
		for {
			read()
			select {
			case <-quit:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(quit); <-done; read(); return peak }
}

// TableRows appends the memory rows of a ledger or replay table to tb: the
// budget and the peak resident, each part's peak and bound (the heap's
// bound is its share; its peak is held under Go's soft limit, the row
// after), nothing when m is nil.
func (m *MemoryStatus) TableRows(tb *texttable.Table) {
	if m == nil {
		return
	}
	tb.Row("memory budget, MiB (peak resident)", fmt.Sprintf("%s (%s)", mib(m.BudgetBytes), mib(m.PeakResidentBytes)))
	for _, p := range m.Parts {
		what := " peak / bound"
		if p.Name == "heap" {
			what = " peak / share"
		}
		tb.Row("  "+p.Name+what, mib(p.PeakBytes)+" / "+mib(p.BoundBytes))
	}
	tb.Row("  heap's bound: Go's soft limit", mib(m.GoMemLimitBytes))
}
