package config

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"

	"github.com/sluice-daq/sluice/builder"
	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/plugins"
	"github.com/sluice-daq/sluice/schemas"
)

// Validate checks c and returns an *Error listing every problem, or nil.
// It looks only at the configuration itself; Preflight checks the files it
// names.
func (c *Config) Validate() error {
	var ps conf.Problems
	c.validate(&ps)
	return errOf("", ps)
}

func (c *Config) validate(ps *conf.Problems) {
	if c.Node.ID == "" {
		ps.Add("node.id", nil, "want a node name (default: the host name, which could not be read)")
	}
	if c.Node.DrainTimeout <= 0 {
		ps.Add("node.drain_timeout", c.Node.DrainTimeout, "want a positive duration such as 1m")
	}
	c.validateInputs(ps)
	c.validateMemory(ps)
	c.validateSources(ps)
	c.validateBuilder(ps)
	c.validateBounds(ps)
	c.validateEventSize(ps)
	*ps = append(*ps, c.Trigger.Validate().In("trigger")...)
	*ps = append(*ps, c.Store.Validate().In("store")...)
	c.validateReplay(ps)
	c.validateFill(ps)
	*ps = append(*ps, c.HTTP.Validate().In("http")...)
	*ps = append(*ps, c.Flight.Validate().In("flight")...)
	*ps = append(*ps, c.Farm.Validate().In("farm")...)
	w := c.Warnings
	if w.Interval <= 0 {
		ps.Add("warnings.interval", w.Interval, "want a positive duration such as 10s")
	}
	if w.SilentAfter <= 0 {
		ps.Add("warnings.silent_after", w.SilentAfter, "want a positive duration such as 10s")
	}
	for _, f := range []struct {
		key string
		v   float64
	}{{"incomplete_fraction", w.IncompleteFraction}, {"late_fraction", w.LateFraction}, {"backpressure_fraction", w.BackpressureFraction}} {
		if !(f.v >= 0 && f.v <= 1) {
			ps.Add("warnings."+f.key, f.v, "want a fraction 0..1 (0 = no warning)")
		}
	}
	if !oneOf(c.Log.Level, "debug", "info", "warn", "error") {
		ps.Add("log.level", c.Log.Level, "want one of debug, info, warn, error")
	}
	if !oneOf(c.Log.Format, "auto", "text", "json") {
		ps.Add("log.format", c.Log.Format, "want one of auto, text, json")
	}
	if c.Log.RateLimit < 0 {
		ps.Add("log.rate_limit", c.Log.RateLimit, "want >= 0 records per interval (0 = no limit)")
	}
	if c.Log.RateInterval <= 0 {
		ps.Add("log.rate_interval", c.Log.RateInterval, "want a positive duration such as 10s")
	}
}

func (c *Config) validateSources(ps *conf.Problems) {
	if len(c.Sources) == 0 {
		ps.Add("sources", nil, "want at least one source group (name + source list such as \"0-511,600\")")
	}
	names := map[string]int{}
	// The ids of the groups so far, as disjoint ranges by first id, each
	// with the group it came from: a group's lists are checked against
	// them range by range, never id by id (16 groups of 2^20 sources took
	// seconds and a GiB listed in a map).
	var owned []ownedRange
	var distinct uint64
	for i, g := range c.Sources {
		p := fmt.Sprintf("sources[%d]", i)
		if !conf.ValidName(g.Name) {
			ps.Add(p+".name", g.Name, conf.NameWant)
		} else if j, dup := names[g.Name]; dup {
			ps.Add(p+".name", g.Name, "want a unique group name (also sources[%d])", j)
		}
		names[g.Name] = i
		rs, err := schemas.ParseSourceRanges(g.Sources)
		switch {
		case err != nil:
			ps.Add(p+".sources", g.Sources, "%v", err)
		case len(rs) == 0:
			ps.Add(p+".sources", g.Sources, "want at least one source id, e.g. \"0-511,600\"")
		}
		reported := false
		var add []ownedRange
		for _, r := range rs {
			parts, id, j, shared := unowned(owned, r)
			if shared && !reported {
				ps.Add(p+".sources", g.Sources, "want each source in one group only: source %d is also in sources[%d]", id, j)
				reported = true
			}
			for _, u := range parts {
				add = append(add, ownedRange{u, i})
				distinct += u.Len()
			}
		}
		owned = append(owned, add...)
		sort.Slice(owned, func(a, b int) bool { return owned[a].Lo < owned[b].Lo })
	}
	if q := c.Builder.Quorum; distinct > 0 && q > 0 && uint64(q) > distinct {
		ps.Add("builder.quorum", q, "want at most the %d expected sources (0 = more than half of them)", distinct)
	}
}

// ownedRange is a range of source ids in the group sources[group].
type ownedRange struct {
	schemas.SourceRange
	group int
}

// unowned splits r into the parts no range of owned (disjoint, ascending)
// holds; shared says some id of r is held, id the first of them and group
// its group.
func unowned(owned []ownedRange, r schemas.SourceRange) (parts []schemas.SourceRange, id uint32, group int, shared bool) {
	k := sort.Search(len(owned), func(k int) bool { return owned[k].Hi >= r.Lo })
	next := uint64(r.Lo) // the first id of r not yet accounted for
	for ; k < len(owned) && owned[k].Lo <= r.Hi; k++ {
		o := owned[k]
		if !shared {
			id, group, shared = max(o.Lo, r.Lo), o.group, true
		}
		if next < uint64(o.Lo) {
			parts = append(parts, schemas.SourceRange{Lo: uint32(next), Hi: o.Lo - 1})
		}
		next = uint64(o.Hi) + 1
	}
	if next <= uint64(r.Hi) {
		parts = append(parts, schemas.SourceRange{Lo: uint32(next), Hi: r.Hi})
	}
	return parts, id, group, shared
}

func (c *Config) validateBuilder(ps *conf.Problems) {
	b := c.Builder
	*ps = append(*ps, b.Config.Validate().In("builder")...)
	if b.QueueBatches < 1 || b.QueueBatches > 1024 {
		ps.Add("builder.queue_batches", b.QueueBatches, "want 1..1024 batches")
	}
}

func (c *Config) validateReplay(ps *conf.Problems) {
	r := c.Replay
	*ps = append(*ps, c.Trigger.ValidateReplay(r.Stages).In("replay.stages")...)
	if r.Rate < 0 || math.IsNaN(r.Rate) || math.IsInf(r.Rate, 0) {
		ps.Add("replay.rate", r.Rate, "want events per second >= 0 (0 = unlimited)")
	}
	if r.InterFill < 0 {
		ps.Add("replay.inter_fill", r.InterFill, "want an idle time >= 0 (0 = no inter-fill replay)")
	}
	if r.BatchEvents < 1 || r.BatchEvents > builder.MaxBatchEvents {
		ps.Add("replay.batch_events", r.BatchEvents, "want 1..%d events per batch", builder.MaxBatchEvents)
	}
}

func (c *Config) validateFill(ps *conf.Problems) {
	*ps = append(*ps, c.Fill.Validate().In("fill")...)
	if !c.Fill.Enabled() {
		return
	}
	online := c.OnlineStages()
	if len(online) == 0 {
		ps.Add("fill", nil, "want an online trigger stage whose deferral fraction the fill plan sets")
	} else if s := c.Fill.Stage; s != "" && !slices.ContainsFunc(online, func(st plugins.StageConfig) bool { return st.Name == s }) {
		ps.Add("fill.stage", s, "want the name of an online trigger stage")
	}
	if len(c.ReplayStages()) == 0 {
		ps.Add("fill", nil, "want a replay stage (trigger.stages with when: replay, or replay.stages) to replay the deferred events in the inter-fills")
	}
}

// Preflight checks what the configuration refers to on this machine: the
// plugin binaries are executable files, and each plugin, started once and
// configured, accepts the stage's parameters, declares the lines the stage
// prescales and reads only source groups the config defines; emulator input
// files exist; the store directory can be created and written; a farm
// node's token file holds a token. It returns
// an *Error listing every problem. `sluice run` calls it after Validate,
// before opening any input.
func (c *Config) Preflight() error { return c.preflight(false) }

// PreflightReplay is Preflight for `sluice replay`, which opens no input:
// the inputs' files and rings are not checked (a ring a running node
// holds refused a replay of another store, by the config both use).
func (c *Config) PreflightReplay() error { return c.preflight(true) }

func (c *Config) preflight(replay bool) error {
	var ps conf.Problems
	ps = append(ps, c.Trigger.Preflight().In("trigger")...)
	groups := make([]string, 0, len(c.Sources))
	for _, g := range c.Sources {
		groups = append(groups, g.Name)
	}
	ps = append(ps, c.Trigger.Probe(context.Background(), groups).In("trigger")...)
	if !replay {
		c.preflightInputs(&ps)
	}
	c.preflightSharedMemory(&ps, !replay)
	ps = append(ps, c.Store.Preflight().In("store")...)
	ps = append(ps, c.HTTP.Preflight().In("http")...)
	ps = append(ps, c.Fill.Preflight().In("fill")...)
	ps = append(ps, c.Farm.Preflight().In("farm")...)
	return errOf("", ps)
}

func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

func validPort(p string, zeroOK bool) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n <= 65535 && (n >= 1 || (zeroOK && n == 0))
}

func oneOf(v string, set ...string) bool {
	for _, s := range set {
		if v == s {
			return true
		}
	}
	return false
}

// Preflight says which machine checks Check runs after Validate.
type Preflight int

const (
	NoPreflight     Preflight = iota // the file only
	PreflightRun                     // Config.Preflight: what `sluice run` opens
	PreflightReplay                  // Config.PreflightReplay: what `sluice replay` opens
)

// Check is Validate's and Preflight's problems together (loadErr: those
// Load or Parse found, kept as they are), so that no problem hides behind
// another: an operator fixes them all at once. c nil (a document that does
// not parse) gives loadErr.
func Check(c *Config, loadErr error, preflight Preflight) error {
	if c == nil {
		return loadErr
	}
	var ps []Problem
	file := ""
	add := func(err error) error {
		var ce *Error
		if !errors.As(err, &ce) {
			return err
		}
		if file == "" {
			file = ce.File
		}
		ps = append(ps, ce.Problems...)
		return nil
	}
	if loadErr != nil {
		if err := add(loadErr); err != nil {
			return err
		}
	} else if err := add(c.Validate()); err != nil {
		return err
	}
	if preflight != NoPreflight {
		if err := add(c.preflight(preflight == PreflightReplay)); err != nil {
			return err
		}
	}
	return errOf(file, ps)
}
