package builder

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/sluice-daq/sluice/schemas"
)

// row is one emitted event read back through schemas.NewEventBatch, with
// its bytes copied out so that the batch can be released at once.
type row struct {
	id       uint64
	run      uint32
	ts       uint64
	status   schemas.EventStatus
	nfrag    int
	missing  []uint32
	corrupt  []uint32
	dups     []uint32 // duplicate_sources
	lates    []uint32 // late_sources
	asg      uint64
	payloads map[uint32][]byte // by source, only sources with a non-empty size
	sizes    map[uint32]uint32
}

// harness runs a builder on a checked allocator and collects its batches.
type harness struct {
	t       *testing.T
	b       *Builder
	mem     *memory.CheckedAllocator
	mu      sync.Mutex
	rows    []row
	batches []int // rows per batch, in delivery order
	done    chan struct{}
	read    bool // whether the collector goroutine runs
}

// newHarness starts a builder; when collect is false nobody reads
// Batches() until the test calls startCollecting.
func newHarness(t *testing.T, cfg Config, collect bool) *harness {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	cfg.Allocator = mem
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, b: b, mem: mem, done: make(chan struct{})}
	if collect {
		h.startCollecting()
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if !h.read {
			h.startCollecting()
		}
		if err := b.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		<-h.done
		mem.AssertSize(t, 0)
	})
	return h
}

func (h *harness) startCollecting() {
	h.read = true
	go func() {
		defer close(h.done)
		for rec := range h.b.Batches() {
			h.take(rec)
		}
	}()
}

// take reads every row of a batch, then releases it.
func (h *harness) take(rec arrow.RecordBatch) {
	defer rec.Release()
	eb, err := schemas.NewEventBatch(rec)
	if err != nil {
		h.t.Errorf("NewEventBatch: %v", err)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.batches = append(h.batches, eb.Len())
	for i := range eb.Len() {
		rw := row{
			id: eb.EventID(i), run: eb.Run(i), ts: eb.Timestamp(i), status: eb.Status(i), nfrag: eb.NumFragments(i),
			missing:  append([]uint32(nil), eb.MissingSources(i)...),
			corrupt:  append([]uint32(nil), eb.CorruptSources(i)...),
			dups:     append([]uint32(nil), eb.DuplicateSources(i)...),
			lates:    append([]uint32(nil), eb.LateSources(i)...),
			asg:      eb.Assignment(i),
			payloads: map[uint32][]byte{}, sizes: map[uint32]uint32{},
		}
		for g := range eb.Groups {
			sizes := eb.GroupSizes(g, i)
			k := 0
			eb.Fragments(g, i, func(src uint32, p []byte) bool {
				rw.sizes[src] = sizes[k]
				k++
				if len(p) > 0 {
					rw.payloads[src] = append([]byte(nil), p...)
				}
				return true
			})
			if k != len(eb.Groups[g].Sources) {
				h.t.Errorf("event %d group %d: %d sizes for %d sources", rw.id, g, k, len(eb.Groups[g].Sources))
			}
		}
		h.rows = append(h.rows, rw)
	}
}

// close closes the builder and waits for every batch to be read.
func (h *harness) close() []row {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !h.read {
		h.startCollecting()
	}
	if err := h.b.Close(ctx); err != nil {
		h.t.Fatalf("Close: %v", err)
	}
	<-h.done
	return h.rows
}

// snapshot returns the rows collected so far.
func (h *harness) snapshot() []row {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]row(nil), h.rows...)
}

// releases counts release callbacks per fragment/packet.
type releases struct {
	mu sync.Mutex
	n  map[int]int
	id atomic.Int64
}

func newReleases() *releases { return &releases{n: map[int]int{}} }

// next returns a fresh release callback and registers it as pending.
func (r *releases) next() func() {
	k := int(r.id.Add(1))
	r.mu.Lock()
	r.n[k] = 0
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		r.n[k]++
		r.mu.Unlock()
	}
}

// check asserts that every callback ran exactly once.
func (r *releases) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, n := range r.n {
		if n != 1 {
			t.Errorf("release %d called %d times, want 1", k, n)
		}
	}
}

// frag builds a fragment with a correct CRC unless badCRC.
func frag(src uint32, id uint64, payload string, badCRC bool, flags schemas.FragmentFlag) schemas.Fragment {
	p := []byte(payload)
	crc := schemas.Checksum(p)
	if badCRC {
		crc ^= 0xdeadbeef
	}
	return schemas.Fragment{SourceID: src, EventID: id, Flags: flags, CRC: crc, Payload: p}
}

func mustAdd(t *testing.T, b *Builder, f schemas.Fragment, rel func()) {
	t.Helper()
	if err := b.AddFragment(context.Background(), f, rel); err != nil {
		t.Fatalf("AddFragment(src %d, id %d): %v", f.SourceID, f.EventID, err)
	}
}

func checkBalanced(t *testing.T, l Ledger) {
	t.Helper()
	if !l.Balanced() {
		t.Errorf("ledger does not balance: in %d != in events %d + open %d + discarded %d (%v)",
			l.FragmentsIn, l.FragmentsInEvents, l.FragmentsOpen, l.Discards(), l.Discarded)
	}
}

// waitFor polls cond (under no lock of ours) until it holds; the test's
// own deadline bounds it.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
