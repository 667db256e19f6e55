package node

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-daq/sluice/plugins"
	"github.com/sluice-daq/sluice/schemas"
)

// pluginChain adapts *plugins.Chain to Decider.
type pluginChain struct {
	c      *plugins.Chain
	stages []plugins.StageConfig
	lines  map[string][]string
	names  []string            // the stages in order
	gather prometheus.Gatherer // where the chain's metrics are, for Plugins (nil: none)
}

// NewChain starts the plugin processes of stages, in order, with their
// parameters, prescales and deferral policies; metrics go to reg (nil:
// none). Batches built in arena (nil: none) reach the plugins without a
// copy. On error nothing is left running and the error names the stage and
// the binary.
func NewChain(ctx context.Context, stages []plugins.StageConfig, reg prometheus.Registerer, log *slog.Logger, arena *plugins.Arena) (Decider, error) {
	c, err := plugins.NewChain(ctx, plugins.Config{Stages: stages, Options: plugins.Options{Logger: log, Arena: arena}, Registerer: reg})
	if err != nil {
		return nil, err
	}
	pc := &pluginChain{c: c, stages: stages, lines: map[string][]string{}}
	if g, ok := reg.(prometheus.Gatherer); ok {
		pc.gather = g
	}
	for _, si := range c.Stages() {
		pc.lines[si.Name] = si.Description.Lines
		pc.names = append(pc.names, si.Name)
	}
	return pc, nil
}

func (p *pluginChain) Decide(ctx context.Context, ev *schemas.EventBatch) ([]schemas.Verdict, error) {
	return p.c.Decide(ctx, ev)
}

func (p *pluginChain) Lines(stage string) []string { return p.lines[stage] }

func (p *pluginChain) Stages() []string { return p.names }

func (p *pluginChain) Close() { p.c.Close() }

// Plugins reports each stage's configured and running instances, restarts
// and backlog, read from the chain's own metrics.
func (p *pluginChain) Plugins() []PluginStatus {
	out := make([]PluginStatus, len(p.stages))
	idx := map[string]int{}
	for i, s := range p.stages {
		out[i] = PluginStatus{Stage: s.Name, Plugin: s.Plugin, Instances: s.Instances}
		idx[s.Name] = i
	}
	if p.gather == nil {
		return out
	}
	fams, err := p.gather.Gather()
	if err != nil {
		return out
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			i, ok := -1, false
			for _, l := range m.GetLabel() {
				if l.GetName() == "stage" {
					i, ok = idx[l.GetValue()]
				}
			}
			if !ok {
				continue
			}
			switch f.GetName() {
			case "sluice_trigger_instances_up":
				out[i].Up += int(m.GetGauge().GetValue())
			case "sluice_trigger_restarts_total":
				out[i].Restarts += uint64(m.GetCounter().GetValue())
			case "sluice_trigger_backlog_events":
				out[i].Backlog += int(m.GetGauge().GetValue())
			}
		}
	}
	return out
}
