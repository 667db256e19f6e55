package node

import (
	"context"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/builder"
	"github.com/sluice-daq/sluice/node/emulator"
	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/plugins"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/storage"
)

// Decider is a trigger chain: the online stages in `sluice run`, the
// replay stages in replay.
type Decider interface {
	// Decide returns one verdict per row of ev; it fails only when ctx
	// ends first. Safe for concurrent use.
	Decide(ctx context.Context, ev *schemas.EventBatch) ([]schemas.Verdict, error)
	// State reports each stage in chain order: its plugin (and its line
	// names), its processes, and what it decided so far (the ledger's
	// per-stage counts). Safe for concurrent use, also after Close.
	State() []plugins.StageState
	// Close stops every plugin process.
	Close()
}

// eventBuilder is what the node uses of *builder.Builder.
type eventBuilder interface {
	transport.Sink
	Batches() <-chan arrow.RecordBatch
	Close(ctx context.Context) error
	Ledger() builder.Ledger
}

// eventStore is what the node uses of *storage.Store.
type eventStore interface {
	Put(stream storage.Stream, batch *schemas.EventBatch, verdicts []schemas.Verdict, rows []int) (storage.Ack, error)
	// MaxEventBytes is the largest event Put stores (Ack.TooLarge).
	MaxEventBytes() int64
	WaitDurable(ctx context.Context, seq uint64) error
	Headroom() int64
	Void(ranges []storage.IDRange) (storage.Voided, error)
	Writable() <-chan struct{}
	Close() error
}

// directWrites is the store's DirectWrites (storage.Store has it): whether
// it writes its segment files with O_DIRECT.
type directWrites interface {
	DirectWrites() bool
}

// storeDirect reports st's DirectWrites; false for a store without it.
func storeDirect(st eventStore) bool {
	d, ok := st.(directWrites)
	return ok && d.DirectWrites()
}

// buildUnitSetter is the store's SetBuildUnit (storage.Store has it).
type buildUnitSetter interface {
	SetBuildUnit(name string, incarnation uint64)
}

// Parts are a run's components, opened before the run starts.
type Parts struct {
	Inputs []transport.Input
	// Finite[i] says input i ends by itself (a file, a shm ring, which its
	// writer closes at the end of its stream, a socket with expected
	// senders, or an input fed only by an embedded emulator that sends a
	// fixed amount): the run drains once every input is finite and done.
	Finite []bool
	// Emulators are embedded readout emulators, run beside the inputs and
	// stopped first when the run drains. Emulators[i] feeds Inputs[i] (nil
	// when none).
	Emulators []func(ctx context.Context) error
	Chain     Decider // nil: no online stage, every event is deferred
	// BatchAllocator is where the builder builds its batches (nil: its own
	// pool); OpenParts gives it the plugins' shared-memory arena so that
	// batches reach the plugins without a copy.
	BatchAllocator memory.Allocator
	// Arena is the plugins' shared-memory arena behind BatchAllocator (nil:
	// none), for its peak in the memory status.
	Arena *plugins.Arena
	Store eventStore
	// Flight serves Store over Arrow Flight while the node runs (nil:
	// flight.listen off); closed before the store.
	Flight io.Closer
	// DeferredAtStart is the number of events in the store's deferred
	// stream when the run started (for the deferred backlog).
	DeferredAtStart uint64
	// RunEventsAtStart is the number of events of the configured run
	// number already in the store (both streams) when the run started: a
	// run number reused on the same store, e.g. a restart after a crash.
	RunEventsAtStart uint64
	// ReplayStore and NewReplayChain serve inter-fill replay (nil: off).
	ReplayStore    *storage.Store
	NewReplayChain func(ctx context.Context) (Decider, error)
	// EmulatorSummaries returns what the embedded emulators reported when
	// they ended (nil: none).
	EmulatorSummaries func() []emulator.Summary
	// emulatorFile, set by the node before the inputs start, is told the
	// sources each embedded emulator's file contains once it is read.
	emulatorFile func(input, file string, has []uint32)
	// Close releases what the parts hold besides the above (e.g. sockets).
	Close func()
}
