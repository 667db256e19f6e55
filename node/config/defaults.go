package config

import (
	_ "embed"
	"os"
	"time"

	"github.com/sluice-daq/sluice/builder"
	"github.com/sluice-daq/sluice/node/emulator"
	"github.com/sluice-daq/sluice/node/farm"
	"github.com/sluice-daq/sluice/node/fill"
	"github.com/sluice-daq/sluice/storage"
	"github.com/sluice-daq/sluice/storage/storeflight"
)

// DefaultYAML is the commented default configuration printed by `sluice
// config default`: every key with its default value and meaning, plus an
// embedded synthetic emulator input and one source group so that it runs
// as is. It is written by hand, for operators, except the keys of the
// transports, which each transport documents where it registers (see
// withTransportKeys); a test fails when it differs from the defaults in
// code (Default, the stage defaults) or leaves a key out.
var DefaultYAML = withTransportKeys(defaultTemplate)

//go:embed default.yaml
var defaultTemplate []byte

// base is what a file is decoded over: every section's defaults, taken
// from the package that owns it, and no inputs, sources or stages (those
// have no sensible default and must be written).
func base() *Config {
	return &Config{
		Node:    Node{MemoryBudget: 512 << 20, MemorySplit: DefaultMemorySplit(), DrainTimeout: time.Minute},
		Builder: Builder{Config: builder.Defaults(), QueueBatches: 4},
		Store:   storage.DefaultOptions(),
		Replay:  Replay{BatchEvents: storage.DefaultCursorOptions().BatchSize},
		HTTP:    HTTP{Address: "127.0.0.1:9464"},
		Flight:  storeflight.DefaultConfig(),
		Log:     Log{Level: "info", Format: "auto", RateLimit: 5, RateInterval: 10 * time.Second},
		Warnings: Warnings{Interval: 10 * time.Second, SilentAfter: 10 * time.Second,
			IncompleteFraction: 0.01, LateFraction: 0.01, BackpressureFraction: 0.5},
		Farm: farm.DefaultConfig(),
		Fill: fill.DefaultConfig(),
	}
}

// fillDefaults sets the defaults of list elements (which a file writes
// whole) and of values that depend on other fields.
func (c *Config) fillDefaults() {
	if c.Node.ID == "" {
		if h, err := os.Hostname(); err == nil {
			c.Node.ID = h
		}
	}
	for i := range c.Inputs {
		fillInputDefaults(&c.Inputs[i])
	}
	c.Trigger.SetDefaults()
	if c.Fill.EtcdKey != "" && len(c.Fill.Etcd) == 0 {
		c.Fill.Etcd = c.Farm.Etcd
	}
}

// Default is the configuration DefaultYAML describes.
func Default() *Config {
	c := base()
	c.Inputs = []Input{{
		URI:      "shm://sluice",
		Emulator: &Emulator{Config: emulator.Config{Events: 100000, FragmentSize: emulator.SizeDist{Mean: 4 << 10}}},
	}}
	c.Sources = []SourceGroup{{Name: "all", Sources: "0-15"}}
	c.fillDefaults()
	return c
}
