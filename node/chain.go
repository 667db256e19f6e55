package node

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-daq/sluice/plugins"
)

// NewChain starts the plugin processes of stages, in order, with their
// parameters, prescales and deferral policies; metrics go to reg (nil:
// none; the chain's State reports the same without them). Batches built
// in arena (nil: none) reach the plugins without a copy. On error nothing
// is left running and the error names the stage and the binary.
func NewChain(ctx context.Context, stages []plugins.StageConfig, reg prometheus.Registerer, log *slog.Logger, arena *plugins.Arena) (Decider, error) {
	c, err := plugins.NewChain(ctx, plugins.Config{Stages: stages, Options: plugins.Options{Logger: log, Arena: arena}, Registerer: reg})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// pluginStatus is what /status shows of each stage's plugin processes.
func pluginStatus(stages []plugins.StageState) []PluginStatus {
	out := make([]PluginStatus, len(stages))
	for i, st := range stages {
		out[i] = PluginStatus{Stage: st.Name, Plugin: st.Description.Name, Binary: st.Plugin, Instances: st.Instances, Up: st.Up,
			Restarts: st.Restarts, Backlog: st.Backlog, Calls: st.Calls, Shadow: shadowStatus(st.Shadow)}
	}
	return out
}

func shadowStatus(sh *plugins.ShadowState) *ShadowStatus {
	if sh == nil {
		return nil
	}
	d := sh.Stage.Description
	out := &ShadowStatus{Plugin: d.Name, Version: d.Version, Binary: sh.Stage.Plugin, Instances: sh.Stage.Instances,
		Up: sh.Stage.Up, Restarts: sh.Stage.Restarts, Compared: sh.Compared, Agreeing: sh.Agreeing, Differing: sh.Differ(),
		Sample: sh.Sample}
	for _, p := range sh.Differing {
		if out.ByDecision == nil {
			out.ByDecision = map[string]uint64{}
		}
		out.ByDecision[p.Production.String()+"/"+p.Shadow.String()] = p.Events
	}
	for _, l := range sh.Lines {
		out.ByLine = append(out.ByLine, ShadowLineStatus{Line: l.Line, OnlyProduction: l.OnlyProduction, OnlyShadow: l.OnlyShadow})
	}
	for _, k := range sh.Skipped {
		if out.Skipped == nil {
			out.Skipped = map[string]uint64{}
		}
		out.Skipped[k.Reason] = k.Events
	}
	return out
}

// lineNames are the trigger line names of each stage of c, by stage name.
func lineNames(c Decider) map[string][]string {
	out := map[string][]string{}
	for _, st := range c.State() {
		out[st.Name] = st.Description.Lines
	}
	return out
}
