package node

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-daq/sluice/plugins"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/storage"
)

// NewChain starts the plugin processes of stages, in order, with their
// parameters, prescales and deferral policies; metrics go to reg (nil:
// none; the chain's State reports the same without them). Batches built
// in arena (nil: none) reach the plugins without a copy. The stages'
// shadows with a store_bytes write their differing events to st's shadow
// stream (nil: nowhere). On error nothing is left running and the error
// names the stage and the binary.
func NewChain(ctx context.Context, stages []plugins.StageConfig, reg prometheus.Registerer, log *slog.Logger, arena *plugins.Arena, st *storage.Store) (Decider, error) {
	opts := plugins.Options{Logger: log, Arena: arena}
	if st != nil {
		opts.ShadowStore = func(ev *schemas.EventBatch, v []schemas.Verdict) (int64, error) {
			// Never waited for: durable with the next write the sync
			// policy syncs.
			ack, err := st.Put(storage.Shadow, ev, v, nil)
			return ack.Bytes, err
		}
	}
	c, err := plugins.NewChain(ctx, plugins.Config{Stages: stages, Options: opts, Registerer: reg})
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
	out.Stored, out.StoredBytes = sh.Stored, sh.StoredBytes
	for _, k := range sh.Unstored {
		if out.Unstored == nil {
			out.Unstored = map[string]uint64{}
		}
		out.Unstored[k.Reason] = k.Events
	}
	return out
}

// lineNames are the trigger line names of each stage of c, by stage name.
func lineNames(c Decider) map[string][]string {
	out := map[string][]string{}
	for _, st := range c.State() {
		out[st.Name] = st.Description.Lines
		if st.Shadow != nil {
			// The shadow stream's events carry the shadow's lines.
			out[st.Shadow.Stage.Name] = st.Shadow.Stage.Description.Lines
		}
	}
	return out
}
