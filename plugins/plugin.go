package plugins

import (
	"context"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/plugins/internal/wire"
	"github.com/sluice-daq/sluice/plugins/sdk"
	"github.com/sluice-daq/sluice/schemas"
)

// Options tune how plugin processes are started and fed.
type Options struct {
	// Inline sends batches inside the gRPC request instead of through a
	// shared-memory region (for plugins that cannot map the host's files).
	Inline bool
	// StartTimeout bounds the start-up of a plugin process: handshake and
	// Describe. Default 10 s.
	StartTimeout time.Duration
	// Logger receives the plugin's log lines, tagged with its name. Default
	// slog.Default().
	Logger *slog.Logger
	// Stage labels the log lines of a plugin started with Start (e.g.
	// "check" for `sluice plugin check`); a Chain labels each plugin with
	// its StageConfig.Name instead. Default "standalone".
	Stage string
	// Arena, when set, is the shared-memory region event batches are built
	// in (give it to the builder as its allocator): batches lying in it reach
	// plugins as the places of their buffers, without any copy. Other
	// batches are copied into a per-instance region.
	Arena *Arena
	// Allocator for the scratch memory of the IPC writer and for the batches
	// a stage makes for the next one. Default: Arena if set, else
	// memory.DefaultAllocator.
	Allocator memory.Allocator
	// ShadowStore receives the differing events of the stages' shadows
	// that have a ShadowConfig.StoreBytes (nil: none are stored).
	ShadowStore ShadowStore
}

// Arena is a memory.Allocator over a shared-memory region that every plugin
// maps once, read-only; see NewArena.
type Arena = wire.Arena

// NewArena creates an arena of size bytes in /dev/shm (or the temporary
// directory). Batches built with it reach plugins without a copy; when it
// is full, allocations fall back to the Go heap. Close it after the chain
// and every batch built in it are released.
func NewArena(size int) (*Arena, error) { return wire.NewArena(wire.RegionDir(), size) }

func (o Options) instanceConfig(path, stage string) *instanceConfig {
	cfg := &instanceConfig{path: path, stage: stage, log: o.Logger, inline: o.Inline, startTimeout: o.StartTimeout, mem: o.Allocator, arena: o.Arena}
	if cfg.startTimeout <= 0 {
		cfg.startTimeout = 10 * time.Second
	}
	if cfg.mem == nil && o.Arena != nil {
		cfg.mem = o.Arena
	}
	if cfg.mem == nil {
		cfg.mem = memory.DefaultAllocator
	}
	if cfg.log == nil {
		cfg.log = slog.Default()
	}
	return cfg
}

// Plugin is one running plugin process without supervision: for tools
// (`sluice plugin check`, plugins/sdk/triggertest) that drive a plugin
// directly. The node uses a Chain.
type Plugin struct {
	in *instance
}

// Start starts the plugin binary at path, checks the go-plugin handshake
// (magic cookie, protocol version ProtocolVersion or ProtocolPipelined) and reads its
// description. A binary that is not a plugin, or speaks another protocol
// version, gives an error naming it.
func Start(ctx context.Context, path string, opts Options) (*Plugin, error) {
	stage := opts.Stage
	if stage == "" {
		stage = "standalone"
	}
	in, err := startInstance(ctx, opts.instanceConfig(path, stage))
	if err != nil {
		return nil, err
	}
	return &Plugin{in: in}, nil
}

// Description is what the plugin said about itself at start-up.
func (p *Plugin) Description() sdk.Description { return p.in.desc }

// Pid is the plugin's process id.
func (p *Plugin) Pid() int { return p.in.pid }

// Protocol is the handshake version the plugin and this host settled on:
// ProtocolPipelined for a plugin that speaks it (every plugin built with
// plugins/sdk), else ProtocolVersion.
func (p *Plugin) Protocol() int { return p.in.proto }

// Configure passes the parameters to the plugin.
func (p *Plugin) Configure(ctx context.Context, params map[string]string) error {
	return p.in.configure(ctx, params)
}

// Decide sends one event batch (schemas.EventSchema) and returns the
// plugin's verdict on each row, as it gave it (no stage, prescales or
// deferral policy).
func (p *Plugin) Decide(ctx context.Context, rec arrow.RecordBatch) ([]schemas.Verdict, error) {
	res, _, err := p.in.decide(ctx, int(rec.NumRows()), rec, nil)
	return res, err
}

// Close stops the plugin process and removes its shared-memory region.
func (p *Plugin) Close() { p.in.close() }

// StaleRegion is a shared-memory region (an arena or an instance's region)
// that a trigger host killed with SIGKILL left: its file, the dead host's
// pid and the bytes the file held.
type StaleRegion = wire.StaleRegion

// RemoveStaleRegions removes the shared-memory regions (arenas and
// per-instance regions) that trigger hosts killed with SIGKILL left: those
// whose host pid has exited and that belong to this user, never a live
// host's. It returns those it removed, for the caller to log each.
func RemoveStaleRegions() []StaleRegion { return wire.RemoveStaleRegions(wire.RegionDir()) }

// ReclaimedRegion is the message of the WARN record logged for each region
// RemoveStaleRegions removed, with its "pid", "path" and "bytes".
const ReclaimedRegion = "reclaimed the shared-memory region of a dead trigger host"

// StaleRegionBytes is the space RemoveStaleRegions would free.
func StaleRegionBytes() int64 {
	var n int64
	for _, r := range wire.StaleRegions(wire.RegionDir()) {
		n += r.Bytes
	}
	return n
}

// RegionPrefix starts the file name of every shared-memory region the
// trigger host creates (in /dev/shm, or the temporary directory), followed
// by the host's process id: tools and tests use it to find regions left
// behind.
const RegionPrefix = wire.RegionPrefix

// ProtocolVersion is the base trigger protocol version this host speaks in
// the go-plugin handshake (the service sluice.trigger.v1, one call at a
// time per process).
const ProtocolVersion = wire.ProtocolVersion

// ProtocolPipelined is the handshake version of the same service with up to
// CallsInFlight calls outstanding per process, decided in BatchSeq order;
// the host offers both versions and uses this one with plugins that speak
// it (every plugin built with plugins/sdk).
const ProtocolPipelined = wire.ProtocolPipelined
