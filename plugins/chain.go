package plugins

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

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
	closed sync.Once
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
	for _, r := range wire.RemoveStaleRegions(wire.RegionDir()) {
		cfg.Options.instanceConfig("", "").log.Warn(ReclaimedRegion, "pid", r.PID, "path", r.Path, "bytes", r.Bytes)
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

// ErrNoStage: the chain has no stage of that name.
var ErrNoStage = errors.New("trigger chain: no such stage")

// SetDeferralFraction sets the fraction of events stage defers by its
// fraction policy (StageConfig.Deferral.Fraction, chosen by the same hash
// of the event id, so a larger fraction defers a superset of the events a
// smaller one did) from the next batch on; the node's fill planner moves
// it within its bounds. f outside [0, 1] is clamped. ErrNoStage when the
// chain has no such stage. Safe for concurrent use with Decide.
func (c *Chain) SetDeferralFraction(stage string, f float64) error {
	f = min(max(f, 0), 1)
	if f != f { // NaN
		f = 0
	}
	for _, s := range c.stages {
		if s.cfg.Name == stage {
			s.fraction.Store(math.Float64bits(f))
			return nil
		}
	}
	return fmt.Errorf("%w: %q", ErrNoStage, stage)
}

// DeferralFraction is the fraction stage defers now (see
// SetDeferralFraction); ErrNoStage when there is no such stage.
func (c *Chain) DeferralFraction(stage string) (float64, error) {
	for _, s := range c.stages {
		if s.cfg.Name == stage {
			return math.Float64frombits(s.fraction.Load()), nil
		}
	}
	return 0, fmt.Errorf("%w: %q", ErrNoStage, stage)
}

// StageInfo describes one stage of a chain.
type StageInfo struct {
	Name        string
	Plugin      string          // path of the plugin binary
	Description sdk.Description // what the stage's plugin said about itself
	Instances   int             // plugin processes configured
	// Digest is the SHA-256 (hex) of the plugin's executable, hashed
	// when the stage started (what the stored events' provenance names).
	Digest string
}

// Decide runs one event batch through the chain and returns one verdict
// per row: the decision of the stage that decided last (Stage). Every row gets exactly one final decision, even when plugins
// crash, hang or fail (their events are deferred with StatusTriggerError);
// the error is non-nil only when ctx ends first. Safe for concurrent use:
// concurrent batches run on different instances; with WithBatchOrder the
// stages' counter prescales apply in the batches' order.
func (c *Chain) Decide(ctx context.Context, ev *schemas.EventBatch) ([]schemas.Verdict, error) {
	n := ev.Len()
	out := make([]schemas.Verdict, n)
	// pending holds the rows accepted so far; cur views ev restricted to them.
	pending := make([]int, n)
	for i := range pending {
		pending[i] = i
	}
	cur := ev
	reached := 0 // stages given the batch; the others pass its turn
	defer func() {
		if cur != ev {
			cur.Rec.Release()
		}
		if seq, ok := batchOrder(ctx); ok {
			for _, s := range c.stages[reached:] {
				s.order.pass(seq)
			}
		}
	}()
	for si, s := range c.stages {
		reached = si + 1
		res, err := s.decide(ctx, cur, ev)
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
			if si > 0 {
				// The event came this far accepted by every stage before.
				prev := &out[row]
				r.Trail = append(prev.Trail[:len(prev.Trail):len(prev.Trail)], prev.Step())
			}
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
// it waits for batches in flight. The Arena, if any, is the caller's to
// close. State still reports what the stages did; Close again does nothing.
func (c *Chain) Close() {
	c.closed.Do(func() {
		for _, s := range c.stages {
			s.close()
		}
	})
}

// SkipBatch gives up batch seq's turn (WithBatchOrder) at every stage: for
// a numbered batch the caller does not give to Decide.
func (c *Chain) SkipBatch(seq uint64) {
	for _, s := range c.stages {
		s.order.pass(seq)
	}
}
