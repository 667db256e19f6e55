// Package triggertest runs trigger plugins on chosen event batches, in
// process (an sdk.Trigger value) or out of process (a plugin binary), and
// compares two versions of a trigger (shadow mode, by the rules of the
// node's shadow stages). The batches come from files of any format that
// splits (File, through the registry of formats in schemas/formats) or are
// synthetic (Synthetic). Plugin authors use it in their tests; `sluice
// plugin check` uses it to exercise a binary, `sluice plugin diff` to
// compare two.
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
// same batches and returns the events on which they disagree, in event
// order, by the rules of the node's shadow stages (plugins.Comparison:
// the decision, and for accepted events the lines fired, by name; reasons
// are not compared).
func Shadow(ctx context.Context, a, b Runner, batches []arrow.RecordBatch) ([]Diff, error) {
	d := NewDiffer(a, b)
	var diffs []Diff
	for _, rec := range batches {
		got, err := d.Decide(ctx, rec)
		if err != nil {
			return nil, err
		}
		diffs = append(diffs, got...)
	}
	return diffs, nil
}

// Differ compares a production trigger and a shadow one batch by batch,
// keeping the tally a node keeps for a stage's shadow (what `sluice plugin
// diff` prints). Not safe for concurrent use.
type Differ struct {
	prod, shadow Runner
	cmp          *plugins.Comparison
}

// NewDiffer compares prod's decisions with shadow's.
func NewDiffer(prod, shadow Runner) *Differ {
	return &Differ{prod: prod, shadow: shadow, cmp: plugins.NewComparison(prod.Description().Lines, shadow.Description().Lines)}
}

// Decide runs both triggers on rec and returns the events they decide
// apart, in row order.
func (d *Differ) Decide(ctx context.Context, rec arrow.RecordBatch) ([]Diff, error) {
	da, err := Run(ctx, d.prod, []arrow.RecordBatch{rec})
	if err != nil {
		return nil, err
	}
	db, err := Run(ctx, d.shadow, []arrow.RecordBatch{rec})
	if err != nil {
		return nil, err
	}
	var diffs []Diff
	for i := range da {
		if d.cmp.Add(da[i].EventID, da[i].Verdict, db[i].Verdict) {
			diffs = append(diffs, Diff{EventID: da[i].EventID, A: da[i].Verdict, B: db[i].Verdict})
		}
	}
	return diffs, nil
}

// Result is the tally of every batch decided so far.
func (d *Differ) Result() plugins.ShadowDiff { return d.cmp.Result() }
