package plugins

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"

	"google.golang.org/grpc/status"

	"github.com/sluice-daq/sluice/internal/conf"
)

// Probe starts each stage's plugin once, configures it with the stage's
// parameters and compares what it describes with the configuration, so
// that mistakes stop a node before anything opens (exit 3) instead of
// failing or misbehaving at run time: parameters the plugin refuses,
// prescales on lines it does not declare, and source groups it reads that
// groups (the node's source group names) lacks — without them the plugin
// sees empty payloads and decides on nothing. Stages whose binary is
// missing are left to Preflight. Problems have field paths relative to the
// section; every stage is probed whatever the others' problems.
func (t Trigger) Probe(ctx context.Context, groups []string) conf.Problems {
	var ps conf.Problems
	have := map[string]bool{}
	for _, g := range groups {
		have[g] = true
	}
	for i, s := range t.Stages {
		if s.Plugin == "" || len(Trigger{Stages: []StageConfig{s}}.Preflight()) > 0 {
			continue
		}
		p := conf.Index("stages", i)
		ps = append(ps, probeStage(ctx, s, have, groups).In(p)...)
	}
	return ps
}

func probeStage(ctx context.Context, s StageConfig, have map[string]bool, groups []string) conf.Problems {
	var ps conf.Problems
	pl, err := Start(ctx, s.Plugin, Options{Stage: s.Name, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		ps.Add("plugin", s.Plugin, "want a trigger plugin that starts (%v)", err)
		return ps
	}
	defer pl.Close()
	d := pl.Description()
	if err := pl.Configure(ctx, s.Params); err != nil {
		ps.Add("params", paramsText(s.Params), "want parameters plugin %s accepts: %v", d.Name, unwrapRPC(err))
	}
	d = pl.Description() // as configured: the groups it reads may follow its parameters
	lines := mapKeys(s.Prescales)
	sort.Strings(lines)
	for _, line := range lines {
		if !slices.Contains(d.Lines, line) {
			ps.Add("prescales."+line, s.Prescales[line], "want a line plugin %s declares (lines: %s)", d.Name, strings.Join(d.Lines, ", "))
		}
	}
	for _, g := range d.Columns {
		if !have[g] {
			ps.Add("plugin", s.Plugin, "plugin %s reads source group %q, which sources does not define (groups: %s): add it, or use a plugin for these sources",
				d.Name, g, strings.Join(groups, ", "))
		}
	}
	return ps
}

// paramsText is a stage's parameters as written in YAML flow style.
func paramsText(p map[string]string) string {
	keys := mapKeys(p)
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %q", k, p[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// unwrapRPC is the plugin's own error text of a failed call, without the
// host's and gRPC's wrapping.
func unwrapRPC(err error) string {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if g, ok := e.(interface{ GRPCStatus() *status.Status }); ok && g.GRPCStatus() != nil {
			return g.GRPCStatus().Message()
		}
	}
	return err.Error()
}
