// Package config is the YAML configuration of a sluice node: what it reads,
// which sources make an event, how events are built, which trigger stages
// decide on them, where they are stored and how the node is watched.
//
// Load parses a file strictly (an unknown key is an error, so a typo never
// silently falls back to a default), fills defaults, and Validate checks the
// whole configuration before anything starts, reporting every problem with
// the path of the offending field (e.g. "trigger.stages[1].plugin"), the
// value found and what was expected.
package config

import (
	"time"

	"github.com/sluice-daq/sluice/builder"
	"github.com/sluice-daq/sluice/plugins"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/storage"
)

// Config is one node's configuration. Field comments give the YAML key; the
// commented default file (DefaultYAML) documents every key for operators.
type Config struct {
	Node    Node            `yaml:"node"`
	Run     uint32          `yaml:"run"`     // run number written in every event; `sluice run --run` overrides it
	Inputs  []Input         `yaml:"inputs"`  // at least one
	Sources []SourceGroup   `yaml:"sources"` // expected sources, grouped (one payload column per group)
	Builder Builder         `yaml:"builder"`
	Trigger plugins.Trigger `yaml:"trigger"`
	Store   storage.Options `yaml:"store"`
	Replay  Replay          `yaml:"replay"`
	HTTP    HTTP            `yaml:"http"`
	Log     Log             `yaml:"log"`
}

// Node identifies this node in logs, metrics and summaries.
type Node struct {
	ID string `yaml:"id"` // default: the host name
}

// Input is one readout input. URI schemes: shm://NAME (a shared-memory
// readout ring under /dev/shm), tcp://HOST:PORT and udp://HOST:PORT (listen
// addresses; udp://...?format=vtp for VDIF over VTP), file://PATH (a file of
// native multi-fragment packets, read once). With Emulator set, the node
// also runs an embedded readout emulator that writes to URI, as `sluice
// readout --to URI` would. Zero values take the readout package's defaults.
type Input struct {
	URI string `yaml:"uri"`
	// CreditWindow is what a TCP input grants each connection (bytes); a
	// sender never has more in flight, and no packet may be larger.
	CreditWindow ByteSize `yaml:"credit_window"`
	// SocketBuffer is the SO_RCVBUF requested for TCP and UDP sockets.
	SocketBuffer ByteSize `yaml:"socket_buffer"`
	// ReorderWindow (UDP, datagrams) and LatencyBudget: a missing sequence
	// number is counted lost when a datagram ReorderWindow past it arrives
	// or when the datagram after it has waited LatencyBudget.
	ReorderWindow int           `yaml:"reorder_window"`
	LatencyBudget time.Duration `yaml:"latency_budget"`
	// ExpectStreams (TCP, UDP): the input ends once this many senders ended
	// their stream cleanly (0: it runs until the run drains).
	ExpectStreams int       `yaml:"expect_streams"`
	Emulator      *Emulator `yaml:"emulator"`
}

// Emulator configures an embedded readout emulator (the `sluice readout`
// options): synthetic detector-like events, or the events of a real file
// replayed Loop times with event ids shifted so they stay unique. Zero
// values take the emulator's defaults.
type Emulator struct {
	From     string        `yaml:"from"`     // file to replay (MDF, MEP, VDIF, native MFP); empty = synthetic
	Loop     int           `yaml:"loop"`     // file mode: replay the file this many times (default 1)
	Events   uint64        `yaml:"events"`   // synthetic: events to send (0 = until Duration; both 0: 1000)
	Duration time.Duration `yaml:"duration"` // synthetic: stop after this long (0 = no limit)
	Rate     float64       `yaml:"rate"`     // events per second (0 = as fast as the node takes them)
	// Sources are the synthetic source ids sent (a source list); empty: the
	// configured source groups, whose names choose the payload kind
	// (calorimeter towers for ecal/hcal, muon candidates for muon, ...).
	Sources      string   `yaml:"sources"`
	Packing      int      `yaml:"packing"`        // fragments per multi-fragment packet (default 1)
	FragmentSize SizeDist `yaml:"fragment_size"`  // synthetic payload sizes
	Faults       Faults   `yaml:"faults"`         // fault injection probabilities
	Seed         uint64   `yaml:"seed"`           // payload content and fault draws
	FirstEventID uint64   `yaml:"first_event_id"` // synthetic: first event id
	Connections  int      `yaml:"connections"`    // tcp: sender connections (default min(sources, 4))
	RingSize     ByteSize `yaml:"ring_size"`      // shm: data region of the ring it creates (default 64MiB)
	SocketBuffer ByteSize `yaml:"socket_buffer"`  // tcp/udp: SO_SNDBUF
}

// SizeDist is a fragment payload size distribution in bytes.
type SizeDist struct {
	Dist  string   `yaml:"dist"`  // "fixed" (default), "uniform" or "lognormal"
	Mean  ByteSize `yaml:"mean"`  // fixed: the size; lognormal: the mean (default 128)
	Min   ByteSize `yaml:"min"`   // uniform: lower bound
	Max   ByteSize `yaml:"max"`   // uniform: upper bound
	Sigma float64  `yaml:"sigma"` // lognormal: sigma of log(size) (default 0.5)
}

// Faults are fault-injection probabilities per packet in [0, 1]. Drop,
// Duplicate, Corrupt and Truncate exclude each other (their sum is at most
// 1); Reorder and Stall apply independently.
type Faults struct {
	Drop          float64       `yaml:"drop"`
	Duplicate     float64       `yaml:"duplicate"`
	Corrupt       float64       `yaml:"corrupt"`
	Truncate      float64       `yaml:"truncate"`
	Reorder       float64       `yaml:"reorder"`
	Stall         float64       `yaml:"stall"`
	ReorderWindow int           `yaml:"reorder_window"` // packets (default 8)
	StallDuration time.Duration `yaml:"stall_duration"` // default 10ms
}

// SourceGroup is one group of expected sources, e.g. a sub-detector.
type SourceGroup struct {
	Name    string `yaml:"name"`
	Sources string `yaml:"sources"` // a source list: "0-511,600"
}

// Builder is the builder section: the builder's own settings (the yaml
// keys of builder.Config) and the node's memory budget and batch queue,
// which bound what the builder and the stages after it hold.
type Builder struct {
	builder.Config `yaml:",inline"`
	// MemoryBudget bounds payload bytes held by the builder (half: its
	// MaxBufferedBytes) plus the batches between the builder and the store
	// (half). `sluice run` also sets Go's soft memory limit to it plus
	// 128MiB unless GOMEMLIMIT is set.
	MemoryBudget ByteSize `yaml:"memory_budget"`
	// QueueBatches is the depth of the bounded queue of batches between the
	// builder and the trigger chain.
	QueueBatches int `yaml:"queue_batches"`
}

// Replay configures deferred replay, by `sluice replay` and inter-fill.
type Replay struct {
	// Stages names the trigger stages run in replay; empty means the stages
	// with when: replay, or every stage when none is marked.
	Stages []string `yaml:"stages"`
	Rate   float64  `yaml:"rate"` // events per second (0 = unlimited)
	// InterFill starts replay inside `sluice run` once every input has been
	// idle this long, and stops it when data returns (0 = never).
	InterFill   time.Duration `yaml:"inter_fill"`
	BatchEvents int           `yaml:"batch_events"` // events per replayed batch (default 256)
}

// Log configures log/slog output.
type Log struct {
	Level  string `yaml:"level"`  // debug, info (default), warn, error
	Format string `yaml:"format"` // auto (default: text on a terminal, JSON otherwise), text, json
	// RateLimit caps records per key (message + source) per RateInterval;
	// the rest are counted and reported as "suppressed" (default 5 per 10s).
	RateLimit    int           `yaml:"rate_limit"`
	RateInterval time.Duration `yaml:"rate_interval"`
}

// Groups parses the source groups (call after Validate succeeded).
func (c *Config) Groups() ([]schemas.SourceGroup, error) {
	out := make([]schemas.SourceGroup, 0, len(c.Sources))
	for _, g := range c.Sources {
		ids, err := schemas.ParseSourceList(g.Sources)
		if err != nil {
			return nil, err
		}
		out = append(out, schemas.SourceGroup{Name: g.Name, Sources: ids})
	}
	return out, nil
}

// OnlineStages are the stages run by `sluice run`, in order.
func (c *Config) OnlineStages() []plugins.StageConfig { return c.Trigger.Online() }

// ReplayStages are the stages run in replay, in chain order: those listed
// in replay.stages, else those marked when: replay/both, else all.
func (c *Config) ReplayStages() []plugins.StageConfig { return c.Trigger.Replay(c.Replay.Stages) }
