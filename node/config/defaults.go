package config

import (
	_ "embed"
	"os"
	"time"

	"github.com/sluice-daq/sluice/builder"
	"github.com/sluice-daq/sluice/storage"
)

// DefaultYAML is the commented default configuration printed by `sluice
// config default`: every key with its default value and meaning, plus an
// embedded synthetic emulator input and one source group so that it runs
// as is. A test checks that it parses to Default() and validates.
//
//go:embed default.yaml
var DefaultYAML []byte

// Default defaults of scalar settings.
const (
	DefaultHTTPAddress  = "127.0.0.1:9464"
	DefaultMemoryBudget = 256 << 20
)

// base is what a file is decoded over: every scalar default set, and no
// inputs, sources or stages (those have no sensible default and must be
// written).
func base() *Config {
	return &Config{
		Builder: Builder{Config: builder.Defaults(), MemoryBudget: DefaultMemoryBudget, QueueBatches: 4},
		Store:   storage.DefaultOptions(),
		Replay:  Replay{BatchEvents: 256},
		HTTP:    HTTP{Address: DefaultHTTPAddress},
		Log:     Log{Level: "info", Format: "auto", RateLimit: 5, RateInterval: 10 * time.Second},
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
		in := &c.Inputs[i]
		if in.CreditWindow == 0 {
			in.CreditWindow = 8 << 20
		}
		if in.SocketBuffer == 0 {
			in.SocketBuffer = 8 << 20
		}
		if in.ReorderWindow == 0 {
			in.ReorderWindow = 256
		}
		if in.LatencyBudget == 0 {
			in.LatencyBudget = 20 * time.Millisecond
		}
		if e := in.Emulator; e != nil {
			if e.Loop == 0 {
				e.Loop = 1
			}
			if e.Packing == 0 {
				e.Packing = 1
			}
			if e.FragmentSize.Dist == "" {
				e.FragmentSize.Dist = "fixed"
			}
			if e.FragmentSize.Mean == 0 {
				e.FragmentSize.Mean = 128
			}
			if e.FragmentSize.Sigma == 0 {
				e.FragmentSize.Sigma = 0.5
			}
			if e.Faults.ReorderWindow == 0 {
				e.Faults.ReorderWindow = 8
			}
			if e.Faults.StallDuration == 0 {
				e.Faults.StallDuration = 10 * time.Millisecond
			}
			if e.RingSize == 0 {
				e.RingSize = 64 << 20
			}
			if e.SocketBuffer == 0 {
				e.SocketBuffer = 4 << 20
			}
		}
	}
	c.Trigger.SetDefaults()
}

// Default is the configuration DefaultYAML describes.
func Default() *Config {
	c := base()
	c.Inputs = []Input{{
		URI:      "shm://sluice",
		Emulator: &Emulator{Events: 100000, FragmentSize: SizeDist{Mean: 4 << 10}},
	}}
	c.Sources = []SourceGroup{{Name: "all", Sources: "0-15"}}
	c.fillDefaults()
	return c
}
