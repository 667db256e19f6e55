// Package triggertest runs trigger plugins on chosen event batches, in
// process (an sdk.Trigger value) or out of process (a plugin binary), and
// compares two versions of a trigger (shadow mode). The batches come from
// files of any format that splits (File, through the registry of formats
// in schemas/formats) or are synthetic (Synthetic). Plugin authors use it
// in their tests; `sluice plugin check` uses it to exercise a binary.
package triggertest

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sluice-daq/sluice/plugins"
	"github.com/sluice-daq/sluice/plugins/sdk"
	"github.com/sluice-daq/sluice/schemas"
)

// Runner is a configured trigger that decides event batches.
type Runner interface {
	Description() sdk.Description
	// Decide returns one result per row of rec (schemas.EventSchema).
	Decide(ctx context.Context, rec arrow.RecordBatch) ([]schemas.Verdict, error)
	Close()
}

// InProcess configures t with params and runs it in this process, as the
// SDK's server would: a fresh zeroed result slice per batch, and results
// checked for a decision on every row.
func InProcess(t sdk.Trigger, params map[string]string) (Runner, error) {
	if err := t.Configure(params); err != nil {
		return nil, fmt.Errorf("configure %s: %w", t.Describe().Name, err)
	}
	return &inProcess{t: t}, nil
}

type inProcess struct{ t sdk.Trigger }

func (r *inProcess) Description() sdk.Description { return r.t.Describe() }
func (r *inProcess) Close()                       {}

func (r *inProcess) Decide(_ context.Context, rec arrow.RecordBatch) ([]schemas.Verdict, error) {
	ev, err := schemas.NewEventBatch(rec)
	if err != nil {
		return nil, err
	}
	out := make([]schemas.Verdict, ev.Len())
	if err := r.t.Decide(ev, out); err != nil {
		return nil, err
	}
	for i, res := range out {
		if res.Decision < schemas.DecisionAccept || res.Decision > schemas.DecisionDefer {
			return nil, fmt.Errorf("%s left event %d (row %d) with decision %d", r.t.Describe().Name, ev.EventID(i), i, res.Decision)
		}
	}
	return out, nil
}

// Binary starts the plugin binary at path (see plugins.Start) and configures
// it with params.
func Binary(ctx context.Context, path string, params map[string]string, opts plugins.Options) (Runner, error) {
	p, err := plugins.Start(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	if err := p.Configure(ctx, params); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Decision is one event's result.
type Decision struct {
	EventID uint64
	schemas.Verdict
}

// Run decides every batch with r and returns the results in event order.
func Run(ctx context.Context, r Runner, batches []arrow.RecordBatch) ([]Decision, error) {
	var out []Decision
	for bi, rec := range batches {
		ev, err := schemas.NewEventBatch(rec)
		if err != nil {
			return nil, fmt.Errorf("batch %d: %w", bi, err)
		}
		res, err := r.Decide(ctx, rec)
		if err != nil {
			return nil, fmt.Errorf("%s, batch %d: %w", r.Description().Name, bi, err)
		}
		for i, x := range res {
			out = append(out, Decision{EventID: ev.EventID(i), Verdict: x})
		}
	}
	return out, nil
}

// Diff is an event on which two triggers disagree.
type Diff struct {
	EventID uint64
	A, B    schemas.Verdict
}

// Shadow runs a (e.g. the deployed version) and b (the candidate) on the
// same batches and returns the events whose decision or lines differ, in
// event order. Reasons are not compared.
func Shadow(ctx context.Context, a, b Runner, batches []arrow.RecordBatch) ([]Diff, error) {
	da, err := Run(ctx, a, batches)
	if err != nil {
		return nil, err
	}
	db, err := Run(ctx, b, batches)
	if err != nil {
		return nil, err
	}
	var diffs []Diff
	for i := range da {
		if da[i].Decision != db[i].Decision || da[i].Lines != db[i].Lines {
			diffs = append(diffs, Diff{EventID: da[i].EventID, A: da[i].Verdict, B: db[i].Verdict})
		}
	}
	return diffs, nil
}
