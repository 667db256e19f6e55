package plugins

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-daq/sluice/plugins/internal/wire"
	"github.com/sluice-daq/sluice/plugins/sdk"
	"github.com/sluice-daq/sluice/schemas"
)

// Config describes a trigger chain.
type Config struct {
	Stages []StageConfig // in order; an event accepted by one stage goes to the next
	Options
	// Registerer receives the chain's metrics (sluice_trigger_…); nil: none.
	Registerer prometheus.Registerer
}

// Chain runs event batches through its stages in order. Events rejected or
// deferred by a stage stop there; events accepted by the last stage are
// accepted.
type Chain struct {
	stages []*stage
	mem    memory.Allocator
}

// NewChain starts every instance of every stage (checking handshakes,
// describing and configuring the plugins). On error nothing is left running
// and the error names the stage and the binary.
func NewChain(ctx context.Context, cfg Config) (*Chain, error) {
	if len(cfg.Stages) == 0 {
		return nil, errors.New("trigger chain: no stages")
	}
	stages := make([]StageConfig, len(cfg.Stages))
	for i, sc := range cfg.Stages {
		stages[i] = sc.withDefaults()
	}
	if ps := (Trigger{Stages: stages}).Validate(); len(ps) > 0 {
		return nil, fmt.Errorf("trigger chain: %s", ps)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("trigger chain: metrics: %w", err)
	}
	c := &Chain{mem: cfg.Options.instanceConfig("", "").mem}
	if n := wire.RemoveStaleRegions(wire.RegionDir()); n > 0 {
		cfg.Options.instanceConfig("", "").log.Warn("removed shared-memory regions of dead trigger hosts", "regions", n)
	}
	for _, sc := range stages {
		s, err := newStage(ctx, sc, cfg.Options, m)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("trigger chain: %w", err)
		}
		c.stages = append(c.stages, s)
	}
	return c, nil
}

// StageInfo describes one running stage.
type StageInfo struct {
	Name        string
	Description sdk.Description // what the stage's plugin said about itself
	Instances   int
}

// Stages describes the chain's stages in order.
func (c *Chain) Stages() []StageInfo {
	out := make([]StageInfo, len(c.stages))
	for i, s := range c.stages {
		out[i] = StageInfo{Name: s.cfg.Name, Description: s.desc, Instances: len(s.slots)}
	}
	return out
}

// Decide runs one event batch through the chain and returns one verdict
// per row: the decision of the stage that decided last (Stage), with
// Fired set. Every row gets exactly one final decision, even when plugins
// crash, hang or fail (their events are deferred with StatusTriggerError);
// the error is non-nil only when ctx ends first. Safe for concurrent use:
// concurrent batches run on different instances.
func (c *Chain) Decide(ctx context.Context, ev *schemas.EventBatch) ([]schemas.Verdict, error) {
	n := ev.Len()
	out := make([]schemas.Verdict, n)
	// pending holds the rows accepted so far; cur views ev restricted to them.
	pending := make([]int, n)
	for i := range pending {
		pending[i] = i
	}
	// fired backs every row's Fired: row i owns fired[i*ns : (i+1)*ns].
	ns := len(c.stages)
	fired := make([]uint64, n*ns)
	cur := ev
	defer func() {
		if cur != ev {
			cur.Rec.Release()
		}
	}()
	for si, s := range c.stages {
		res, err := s.decide(ctx, cur)
		if err != nil {
			return nil, err
		}
		last := si == len(c.stages)-1
		next := pending[:0:0]
		for j, row := range pending {
			r := res[j]
			if r.Decision == schemas.DecisionAccept && !last {
				next = append(next, row)
			}
			fired[row*ns+si] = r.Lines
			r.Fired = fired[row*ns : row*ns+si+1 : row*ns+si+1]
			out[row] = r
		}
		if last || len(next) == 0 {
			break
		}
		if len(next) < len(pending) {
			sub, err := c.restrict(ctx, cur, positions(pending, next))
			if err != nil {
				return nil, fmt.Errorf("trigger chain: selecting the events for stage %s: %w", c.stages[si+1].cfg.Name, err)
			}
			if cur != ev {
				cur.Rec.Release()
			}
			cur = sub
		}
		pending = next
	}
	return out, nil
}

// restrict returns a view of a new batch holding rows of ev, for the next
// stage; the caller releases its record.
func (c *Chain) restrict(ctx context.Context, ev *schemas.EventBatch, rows []int) (*schemas.EventBatch, error) {
	rec, err := selectRows(ctx, c.mem, ev.Rec, rows)
	if err != nil {
		return nil, err
	}
	sub, err := schemas.NewEventBatch(rec)
	if err != nil {
		rec.Release()
		return nil, err
	}
	return sub, nil
}

// Close stops every plugin process and removes the shared-memory regions;
// it waits for batches in flight. The Arena, if any, is the caller's to close.
func (c *Chain) Close() {
	for _, s := range c.stages {
		s.close()
	}
	c.stages = nil
}
