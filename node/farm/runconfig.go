package farm

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sluice-daq/sluice/schemas"
)

// RunConfigSchema is the version of the RunConfig record.
const RunConfigSchema = 1

// RunConfig is the one configuration of a run that every node of the farm
// must share (kept in etcd at /sluice/<farm>/runs/<run>/config): which
// sources make an event, how work is cut and moved, and which trigger
// plugins (by digest) with which prescales decide. A node whose own view
// differs refuses to join the run, naming the difference (Diff).
type RunConfig struct {
	Schema   int    `json:"schema"`
	Run      uint32 `json:"run"`
	Protocol string `json:"protocol"` // push or pull
	Unit     string `json:"unit"`     // events or packets
	// AssignmentSize is elements (event ids or packets) per assignment.
	AssignmentSize int    `json:"assignment_size"`
	Release        string `json:"release"` // received, decided or durable
	// MaxOutstanding (pull): a BU's unreleased assignments at most.
	MaxOutstanding int `json:"max_outstanding,omitempty"`
	// MaxRequests (pull): requests a BU has outstanding at the RUs at
	// once, over all its assignments (traffic shaping); 0: every RU of an
	// assignment at once.
	MaxRequests int `json:"max_requests,omitempty"`
	// ReleaseGroup is how many releases a BU sends in one message.
	ReleaseGroup int           `json:"release_group"`
	Sources      []SourceGroup `json:"sources"`
	Plugins      []Plugin      `json:"plugins,omitempty"`
	// Prescales: stage name → trigger line → keep 1 in N.
	Prescales map[string]map[string]uint32 `json:"prescales,omitempty"`
}

// SourceGroup is one group of expected sources, as a source list
// ("0-511,600", schemas.FormatSourceList's canonical form).
type SourceGroup struct {
	Name    string `json:"name"`
	Sources string `json:"sources"`
}

// Plugin is one trigger stage's plugin: its stage, binary name, the
// SHA-256 of the binary (hex), so two nodes run the same code, and the
// parameters it is configured with.
type Plugin struct {
	Stage  string            `json:"stage"`
	Name   string            `json:"name"`
	Digest string            `json:"digest"`
	Params map[string]string `json:"params,omitempty"`
}

// Validate checks the record, naming the first bad field.
func (c RunConfig) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("run configuration: %s: %s", field, fmt.Sprintf(format, args...))
	}
	if c.Schema != RunConfigSchema {
		return bad("schema", "%d, this node reads %d", c.Schema, RunConfigSchema)
	}
	if _, err := ParseProtocol(c.Protocol); err != nil {
		return bad("protocol", "%v", err)
	}
	if c.Unit != UnitEvents.String() && c.Unit != UnitPackets.String() {
		return bad("unit", "%q: want events or packets", c.Unit)
	}
	if _, err := ParseOutcome(c.Release); err != nil {
		return bad("release", "%v", err)
	}
	if c.AssignmentSize < 1 || c.AssignmentSize > 1<<24 {
		return bad("assignment_size", "%d: want 1..%d", c.AssignmentSize, 1<<24)
	}
	if c.MaxRequests < 0 {
		return bad("max_requests", "%d: want >= 0", c.MaxRequests)
	}
	if c.Protocol == "pull" && c.MaxOutstanding < 1 {
		return bad("max_outstanding", "%d: pull needs at least 1", c.MaxOutstanding)
	}
	if c.ReleaseGroup < 1 {
		return bad("release_group", "%d: want at least 1", c.ReleaseGroup)
	}
	if len(c.Sources) == 0 {
		return bad("sources", "no source group")
	}
	names := map[string]bool{}
	for i, g := range c.Sources {
		if g.Name == "" || names[g.Name] {
			return bad(fmt.Sprintf("sources[%d].name", i), "%q: empty or repeated", g.Name)
		}
		names[g.Name] = true
		if _, err := schemas.ParseSourceList(g.Sources); err != nil {
			return bad(fmt.Sprintf("sources[%d].sources", i), "%v", err)
		}
	}
	return nil
}

// EMConfig is the event manager's part of the run configuration, with the
// EM's own id block size and linger.
func (c RunConfig) EMConfig(blockSize uint64, linger time.Duration) (EMConfig, error) {
	if err := c.Validate(); err != nil {
		return EMConfig{}, err
	}
	p, _ := ParseProtocol(c.Protocol)
	o, _ := ParseOutcome(c.Release)
	cfg := EMConfig{Protocol: p, AssignmentSize: c.AssignmentSize, Linger: linger, MaxOutstanding: c.MaxOutstanding, Release: o, BlockSize: blockSize}
	return cfg, cfg.Validate()
}

// Diff lists how mine (this node's view) differs from farm's (the record
// in etcd), one line per difference naming the field and both values;
// empty when they agree. Source lists compare as sets of ids; plugins by
// stage; the order of groups matters (it is the order of the payload
// columns).
func Diff(farm, mine RunConfig) []string {
	var d []string
	add := func(field string, f, m any) {
		d = append(d, fmt.Sprintf("%s: farm has %v, this node %v", field, f, m))
	}
	cmp := func(field string, f, m any) {
		if f != m {
			add(field, f, m)
		}
	}
	cmp("schema", farm.Schema, mine.Schema)
	cmp("run", farm.Run, mine.Run)
	cmp("protocol", farm.Protocol, mine.Protocol)
	cmp("unit", farm.Unit, mine.Unit)
	cmp("assignment_size", farm.AssignmentSize, mine.AssignmentSize)
	cmp("release", farm.Release, mine.Release)
	cmp("max_outstanding", farm.MaxOutstanding, mine.MaxOutstanding)
	cmp("max_requests", farm.MaxRequests, mine.MaxRequests)
	cmp("release_group", farm.ReleaseGroup, mine.ReleaseGroup)

	groupNames := func(gs []SourceGroup) string {
		var s []string
		for _, g := range gs {
			s = append(s, g.Name)
		}
		return "[" + strings.Join(s, " ") + "]"
	}
	if fg, mg := groupNames(farm.Sources), groupNames(mine.Sources); fg != mg {
		add("sources (groups in order)", fg, mg)
	}
	mineBy := map[string]SourceGroup{}
	for _, g := range mine.Sources {
		mineBy[g.Name] = g
	}
	for _, g := range farm.Sources {
		m, ok := mineBy[g.Name]
		if !ok {
			continue // named by the group-order line
		}
		if fs, ms := canonicalSources(g.Sources), canonicalSources(m.Sources); fs != ms {
			add(fmt.Sprintf("sources[%s]", g.Name), fs, ms)
		}
	}

	fp, mp := map[string]Plugin{}, map[string]Plugin{}
	for _, p := range farm.Plugins {
		fp[p.Stage] = p
	}
	for _, p := range mine.Plugins {
		mp[p.Stage] = p
	}
	for _, stage := range unionKeys(fp, mp) {
		f, fok := fp[stage]
		m, mok := mp[stage]
		switch {
		case !fok:
			add(fmt.Sprintf("plugins[%s]", stage), "no such stage", m.Name)
		case !mok:
			add(fmt.Sprintf("plugins[%s]", stage), f.Name, "no such stage")
		default:
			cmp(fmt.Sprintf("plugins[%s].name", stage), f.Name, m.Name)
			cmp(fmt.Sprintf("plugins[%s].digest", stage), f.Digest, m.Digest)
			for _, k := range unionKeys(f.Params, m.Params) {
				fv, fok := f.Params[k]
				mv, mok := m.Params[k]
				if fok != mok || fv != mv {
					add(fmt.Sprintf("plugins[%s].params[%s]", stage, k), param(fv, fok), param(mv, mok))
				}
			}
		}
	}

	for _, stage := range unionKeys(farm.Prescales, mine.Prescales) {
		f, m := farm.Prescales[stage], mine.Prescales[stage]
		for _, line := range unionKeys(f, m) {
			fv, fok := f[line]
			mv, mok := m[line]
			if fok != mok || fv != mv {
				add(fmt.Sprintf("prescales[%s][%s]", stage, line), prescale(fv, fok), prescale(mv, mok))
			}
		}
	}
	return d
}

// Mismatch is Diff as an error wrapping ErrConfigMismatch, or nil.
func Mismatch(farm, mine RunConfig) error {
	d := Diff(farm, mine)
	if len(d) == 0 {
		return nil
	}
	return fmt.Errorf("%w for run %d:\n  %s", ErrConfigMismatch, farm.Run, strings.Join(d, "\n  "))
}

func prescale(v uint32, ok bool) string {
	if !ok {
		return "none"
	}
	return fmt.Sprintf("1 in %d", v)
}

func param(v string, ok bool) string {
	if !ok {
		return "none"
	}
	return fmt.Sprintf("%q", v)
}

func canonicalSources(s string) string {
	ids, err := schemas.ParseSourceList(s)
	if err != nil {
		return fmt.Sprintf("%q (invalid)", s)
	}
	return schemas.FormatSourceList(ids)
}

func unionKeys[V any](a, b map[string]V) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]V{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}
