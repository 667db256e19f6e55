// Package config is the YAML configuration of a sluice node: what it reads,
// which sources make an event, how events are built, which trigger stages
// decide on them, where they are stored and how the node is watched.
//
// Each section belongs to the package it configures, which owns its Go
// type (with the yaml keys), its defaults and its Validate: the builder
// section is builder.Config (plus the node's queue depth), the trigger
// section plugins.Trigger, the store section storage.Options, the farm
// section farm.Config. This package owns the node's own sections (node,
// run, sources, replay, http, log), composes the others into Config, and
// places each section's problems under the section's path.
//
// Load parses a file strictly (an unknown key is an error, so a typo never
// silently falls back to a default), fills defaults, and Validate checks the
// whole configuration before anything starts, reporting every problem with
// the path of the offending field (e.g. "trigger.stages[1].plugin"), the
// value found and what was expected. The rules are written as cases under
// testdata/problems.
package config

import (
	"time"

	"github.com/sluice-daq/sluice/builder"
	"github.com/sluice-daq/sluice/node/farm"
	"github.com/sluice-daq/sluice/node/fill"
	"github.com/sluice-daq/sluice/plugins"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/storage"
	"github.com/sluice-daq/sluice/storage/storeflight"
)

// Config is one node's configuration, one field per section; the
// commented default file (DefaultYAML) documents every key for operators.
type Config struct {
	Node    Node               `yaml:"node"`
	Run     uint32             `yaml:"run"`     // run number written in every event; `sluice run --run` overrides it
	Inputs  []Input            `yaml:"inputs"`  // at least one
	Sources []SourceGroup      `yaml:"sources"` // expected sources, grouped (one payload column per group)
	Builder Builder            `yaml:"builder"`
	Trigger plugins.Trigger    `yaml:"trigger"`
	Store   storage.Options    `yaml:"store"`
	Replay  Replay             `yaml:"replay"`
	HTTP    HTTP               `yaml:"http"`
	Flight  storeflight.Config `yaml:"flight"` // the store over Arrow Flight
	Log     Log                `yaml:"log"`
	// Warnings are the node's WARN records about quiet trouble, at most one
	// of each kind per interval, naming the sources or inputs.
	Warnings Warnings    `yaml:"warnings"`
	Farm     farm.Config `yaml:"farm"` // empty id: the node runs alone
	// Fill makes deferral fill-aware: the accelerator's state, and the
	// plan of the deferral fraction around its fills (no source: off).
	Fill fill.Config `yaml:"fill"`
	// Rerun (sluice run --rerun) takes a run number that already ended on
	// the store again, its stored events replaced by the new ones with the
	// same event ids; without it such a start is refused (ErrRerun in
	// package node). A run killed before it ended is resumed either way.
	Rerun bool `yaml:"-"`
}

// Node identifies this node in logs, metrics and summaries.
type Node struct {
	ID string `yaml:"id"` // default: the host name
	// MemoryBudget bounds everything the node allocates or maps: the Go
	// heap, the plugin arena, the readout rings its emulators create, the
	// store's memory. It is the node's, not one package's: MemorySplit
	// gives each part its share (see Config.Memory).
	MemoryBudget ByteSize    `yaml:"memory_budget"`
	MemorySplit  MemorySplit `yaml:"memory_split"`
	// DrainTimeout bounds how long a drain waits for a store that refuses
	// writes (its disk budget reached) to take the events the node still
	// holds; then they are counted not_stored_at_drain, their ids in the
	// ledger, and the run fails.
	DrainTimeout time.Duration `yaml:"drain_timeout"`
}

// SourceGroup is one group of expected sources, e.g. a sub-detector.
type SourceGroup struct {
	Name    string `yaml:"name"`
	Sources string `yaml:"sources"` // a source list: "0-511,600"
}

// Builder is the builder section: the builder's own settings (the yaml
// keys of builder.Config) and the depth of the node's batch queue. The
// bytes it holds are bounded by node.memory_split.builder.
type Builder struct {
	builder.Config `yaml:",inline"`
	// QueueBatches is the depth of the bounded queue of batches between the
	// builder and the trigger chain.
	QueueBatches int `yaml:"queue_batches"`
	// MaxEventBytes is the largest event the node keeps (payload bytes,
	// every group): a larger one is dropped before the store, counted
	// event_too_large with its id. Validate wants it within what the store
	// takes (storage.Options.MaxEventBytes, from node.memory_split.store)
	// and the builder's share, so that a node configured for the events
	// its detector makes cannot start unable to store them. 0: no limit of
	// its own; the store still leaves out events over its limit
	// (too_large_for_store).
	MaxEventBytes ByteSize `yaml:"max_event_bytes"`
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
	BatchEvents int           `yaml:"batch_events"` // events per replayed batch (1..builder.MaxBatchEvents)
}

// Log configures log/slog output.
type Log struct {
	Level  string `yaml:"level"`  // debug, info, warn, error
	Format string `yaml:"format"` // auto (text on a terminal, JSON otherwise), text, json
	// RateLimit caps records per key (message + source) per RateInterval;
	// the rest are counted and reported as "suppressed" (0: no limit).
	RateLimit    int           `yaml:"rate_limit"`
	RateInterval time.Duration `yaml:"rate_interval"`
}

// Warnings sets when the node warns while it runs. A fraction 0 turns its
// warning off.
type Warnings struct {
	Interval time.Duration `yaml:"interval"` // at most one warning of each kind per interval
	// SilentAfter: a source in no event built this long after the inputs
	// opened is reported silent, once, by name (and in /status).
	SilentAfter time.Duration `yaml:"silent_after"`
	// SilentAbsent: the sources reported silent, and those an embedded
	// emulator's file does not contain, are treated as absent (event
	// mode): events stop waiting for them and go out, incomplete, as soon
	// as the other sources are in. A source that then sends is waited for
	// again.
	SilentAbsent bool `yaml:"silent_absent"`
	// IncompleteFraction of the events built in an interval.
	IncompleteFraction float64 `yaml:"incomplete_fraction"`
	// LateFraction of the fragments received in an interval that came
	// after their event was built (discarded as late).
	LateFraction float64 `yaml:"late_fraction"`
	// BackpressureFraction of an interval's wall-clock time an input spent
	// waiting for the builder to take its packets: time during which at
	// least one of its connections waited, so 0..1 however many it has.
	BackpressureFraction float64 `yaml:"backpressure_fraction"`
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

// ReplaysInRun says whether `sluice run` replays deferred events itself:
// in inter-fills (fill), or once its inputs are idle (replay.inter_fill),
// with replay stages to do it.
func (c *Config) ReplaysInRun() bool {
	return (c.Replay.InterFill > 0 || c.Fill.Enabled()) && len(c.ReplayStages()) > 0
}

// FillStage is the online stage whose deferral fraction the fill plan
// sets: fill.stage, or the first online stage ("" when there is none).
func (c *Config) FillStage() string {
	if c.Fill.Stage != "" {
		return c.Fill.Stage
	}
	if on := c.OnlineStages(); len(on) > 0 {
		return on[0].Name
	}
	return ""
}

// ReplayStages are the stages run in replay, in chain order: those listed
// in replay.stages, else those marked when: replay/both, else all.
func (c *Config) ReplayStages() []plugins.StageConfig { return c.Trigger.Replay(c.Replay.Stages) }
