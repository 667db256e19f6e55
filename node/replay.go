package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/node/config"
	"github.com/sluice-daq/sluice/plugins"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/storage"
)

// ReplayOptions configure a deferred replay.
type ReplayOptions struct {
	Selection   storage.Selection // runs and event ids to replay (zero: all)
	Rate        float64           // events per second at most (0: unlimited)
	BatchEvents int               // events per batch (default: the cursor's, storage.DefaultCursorOptions)
	// MaxBatchBytes bounds a batch's stored value bytes (at least one
	// event a batch; default: the cursor's). The store's commit re-encodes
	// a batch's accepted and kept events into one buffer on the Go heap,
	// so this bounds what a replay holds live per batch.
	MaxBatchBytes int64
	// Mem allocates the replayed batches (default: Go's allocator); give
	// the replay chain's arena so they reach the plugins without a copy.
	Mem memory.Allocator
	// Progress, when set, is called after each committed batch.
	Progress func(ReplaySummary)
}

// ReplaySummary accounts for one replay: every deferred event read was
// accepted (moved to the accepted stream), rejected (removed) or kept
// deferred, in one atomic commit per batch. JSON names are the contract of
// `sluice replay --summary-json`.
type ReplaySummary struct {
	Selected        uint64            `json:"events_selected"` // deferred events in the selection at the start
	Replayed        uint64            `json:"events_replayed"`
	Accepted        uint64            `json:"events_accepted"`
	Rejected        uint64            `json:"events_rejected"`
	Kept            uint64            `json:"events_kept_deferred"`
	KeptBy          map[string]uint64 `json:"kept_by"`
	Lines           map[string]uint64 `json:"lines"`
	Batches         uint64            `json:"batches"`
	Bytes           int64             `json:"bytes"`
	Remaining       uint64            `json:"events_remaining"` // deferred events left in the selection at the end
	DurationSeconds float64           `json:"duration_seconds"`
	// StoreAccepted etc. are the store's own replay ledger moved by this
	// replay; Balanced says they equal the counts above and replayed =
	// accepted + rejected + kept.
	StoreAccepted uint64 `json:"store_ledger_accepted"`
	StoreRejected uint64 `json:"store_ledger_rejected"`
	StoreKept     uint64 `json:"store_ledger_kept"`
	Balanced      bool   `json:"balanced"`
	// NotStarted, when set, says why the replay failed before its first
	// batch (a store another process holds, a plugin that does not
	// start): nothing was replayed, and there is no balance to keep.
	NotStarted string `json:"not_started,omitempty"`
	// Memory is the memory budget's parts a replay has and their peaks,
	// as in a run's ledger (nil when it did not start).
	Memory *MemoryStatus `json:"memory,omitempty"`
}

// countDeferred counts the deferred events in sel (a key-only scan).
func countDeferred(st *storage.Store, sel storage.Selection) (uint64, error) {
	return st.Count(storage.Deferred, sel)
}

// Replay reads the deferred stream in (run, event id) order, runs chain on
// each batch and commits the outcomes atomically (storage.Store.Commit), so
// that a replay stopped at any point and started again decides every
// deferred event exactly once. It returns when the selection is exhausted
// or ctx ends (then with ctx.Err() and the summary so far).
func Replay(ctx context.Context, st *storage.Store, chain Decider, opts ReplayOptions) (ReplaySummary, error) {
	start := time.Now()
	s := ReplaySummary{KeptBy: map[string]uint64{}, Lines: map[string]uint64{}}
	before, err := st.Ledger()
	if err != nil {
		return s, err
	}
	if s.Selected, err = countDeferred(st, opts.Selection); err != nil {
		return s, err
	}
	cur, err := st.NewCursor(storage.Deferred, storage.CursorOptions{Selection: opts.Selection, BatchSize: opts.BatchEvents, MaxBatchBytes: opts.MaxBatchBytes, Mem: opts.Mem})
	if err != nil {
		return s, err
	}
	defer cur.Close()
	names := lineNames(chain)
	if err := st.SetLineNames(names); err != nil { // for `sluice store ls`
		return s, err
	}
	finish := func(err error) (ReplaySummary, error) {
		s.DurationSeconds = time.Since(start).Seconds()
		after, lerr := st.Ledger()
		if lerr == nil {
			s.StoreAccepted, s.StoreRejected, s.StoreKept = after.Accepted-before.Accepted, after.Rejected-before.Rejected, after.Kept-before.Kept
		}
		s.Remaining, _ = countDeferred(st, opts.Selection)
		s.Balanced = lerr == nil && s.Replayed == s.Accepted+s.Rejected+s.Kept &&
			s.StoreAccepted == s.Accepted && s.StoreRejected == s.Rejected && s.StoreKept == s.Kept
		return s, errors.Join(err, lerr)
	}
	for {
		if err := ctx.Err(); err != nil {
			return finish(err)
		}
		b, err := cur.Next()
		if errors.Is(err, io.EOF) {
			return finish(nil)
		}
		if err != nil {
			return finish(err)
		}
		err = replayBatch(ctx, st, chain, names, b, &s)
		b.Release()
		if err != nil {
			return finish(err)
		}
		if opts.Rate > 0 {
			due := start.Add(time.Duration(float64(s.Replayed) / opts.Rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return finish(ctx.Err())
				}
			}
		}
		// After the rate's wait, so that Replayed/DurationSeconds is the
		// rate replay keeps, not the burst of a batch.
		if opts.Progress != nil {
			p := s
			p.DurationSeconds = time.Since(start).Seconds()
			opts.Progress(p)
		}
	}
}

// ErrNoReplayStage: the configuration names no trigger stage to replay with.
var ErrNoReplayStage = errors.New("no trigger stage to replay with: add trigger.stages (when: replay) or replay.stages")

// newReplayChain starts cfg's replay stages, for `sluice replay` and
// inter-fill replay alike. It has no metrics registry: its series would
// collide with the online stages' on the node's (inter-fill replay is
// visible through sluice_replay_* and /status instead), and its State
// needs none. Batches built in arena (nil: none) reach the plugins
// without a copy.
func newReplayChain(ctx context.Context, cfg *config.Config, log *slog.Logger, arena *plugins.Arena) (Decider, error) {
	stages := cfg.ReplayStages()
	if len(stages) == 0 {
		return nil, ErrNoReplayStage
	}
	return NewChain(ctx, stages, nil, log, arena, nil)
}

// replayBatchHeapParts: a replayed batch's value bytes are at most the
// heap's share of the budget over this. The batch itself is built in the
// plugin arena (the batches part), but the store's commit copies its
// accepted and kept events into a reused buffer on the Go heap, and the
// garbage collector lets the heap grow to about twice what is live: at the
// cursor's default (256 events, 64 MiB) a batch of ~200 kB events held
// ~100 MB live and took the heap past the budget at small budgets.
const replayBatchHeapParts = 4

// replayOptions are cfg's replay settings (rate, batch size), and the
// batch bytes bounded by the heap's share (replayBatchHeapParts).
func replayOptions(cfg *config.Config) ReplayOptions {
	return ReplayOptions{Rate: cfg.Replay.Rate, BatchEvents: cfg.Replay.BatchEvents,
		MaxBatchBytes: max(int64(cfg.Memory().Heap/replayBatchHeapParts), 1)}
}

// RunReplay is `sluice replay`: it replays the deferred events in sel of
// cfg's store with cfg's replay stages (see Replay), with cfg's rate and
// batch size, building the batches in shared memory the plugins map (the
// memory budget's batches share, as in `sluice run`; the store opens with
// its share).
// progress (nil: none) is called after each committed batch. The store,
// the plugin processes and the memory are opened here and closed before it
// returns, so the plugins' last log lines come before what the caller
// prints next. ErrNoReplayStage when cfg has no replay stage; the summary
// so far with ctx.Err() when ctx ends.
func RunReplay(ctx context.Context, cfg *config.Config, sel storage.Selection, log *slog.Logger, progress func(ReplaySummary)) (ReplaySummary, error) {
	if len(cfg.ReplayStages()) == 0 {
		return ReplaySummary{}, ErrNoReplayStage
	}
	notStarted := func(err error) (ReplaySummary, error) { return ReplaySummary{NotStarted: err.Error()}, err }
	st, err := OpenStore(cfg, nil)
	if err != nil {
		return notStarted(err)
	}
	defer st.Close()
	arena, err := plugins.NewArena(int(cfg.Memory().Batches))
	if err != nil {
		return notStarted(fmt.Errorf("plugin arena: %w", err))
	}
	defer arena.Close()
	chain, err := newReplayChain(ctx, cfg, log, arena)
	if err != nil {
		return notStarted(err)
	}
	defer chain.Close()
	opts := replayOptions(cfg)
	opts.Selection, opts.Progress, opts.Mem = sel, progress, arena
	stop := sampleHeap()
	s, err := Replay(ctx, st, chain, opts)
	s.Memory = replayMemory(cfg, arena, st, stop())
	return s, err
}

// replayMemory is a replay's memory, in the shape of a run's: the budget,
// Go's limit, the parts a replay has (batches: the plugin arena's touched
// bytes; store; heap: the Go runtime's sampled peak, bounded by the
// heap's share, and Go's soft limit) and the VmHWM.
func replayMemory(cfg *config.Config, arena *plugins.Arena, st *storage.Store, heapPeak uint64) *MemoryStatus {
	p := cfg.Memory()
	return &MemoryStatus{
		BudgetBytes: p.Budget, GoMemLimitBytes: p.GoMemLimit,
		Parts: []MemoryPart{
			{Name: "batches", BoundBytes: p.Batches, PeakBytes: uint64(max(arena.HighWater(), 0))},
			{Name: "store", BoundBytes: p.Store, PeakBytes: uint64(st.Memory().MappedPeakBytes)},
			{Name: "heap", BoundBytes: p.Heap, PeakBytes: heapPeak},
		},
		PeakResidentBytes: procStatusBytes("VmHWM"),
	}
}

// replayDurableWait bounds the wait for a committed batch to be synced
// after a stop: the store's sync interval is much shorter.
const replayDurableWait = 30 * time.Second

func replayBatch(ctx context.Context, st *storage.Store, chain Decider, names map[string][]string, b *storage.Batch, s *ReplaySummary) (err error) {
	verdicts, err := chain.Decide(ctx, b.Events)
	if err != nil {
		return err
	}
	if len(verdicts) != b.Events.Len() {
		return fmt.Errorf("replay: trigger chain returned %d decisions for %d events", len(verdicts), b.Events.Len())
	}
	for i := range verdicts {
		verdicts[i] = verdicts[i].Decided()
	}
	ack, err := st.Commit(b, verdicts)
	if err != nil {
		return err
	}
	// Committed: the store's ledger has the batch whatever happens next,
	// so the summary counts it now; a stop (ctx) arriving here must not
	// leave it out, or the summary would not balance with the store.
	defer func() {
		if err == nil && !ack.Durable {
			// Not bounded by ctx: the outcome is decided, only its sync
			// is awaited.
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), replayDurableWait)
			defer cancel()
			err = st.WaitDurable(wctx, ack.Seq)
		}
	}()
	s.Batches++
	s.Bytes += b.Bytes
	s.Replayed += uint64(len(verdicts))
	s.Accepted += uint64(ack.Accepted)
	s.Rejected += uint64(ack.Rejected)
	s.Kept += uint64(ack.Kept)
	for i := range verdicts {
		switch v := &verdicts[i]; v.Decision {
		case schemas.DecisionAccept:
			for _, name := range schemas.FiredLines(v.Lines, names[v.Stage]) {
				s.Lines[v.Stage+"/"+name]++
			}
		case schemas.DecisionDefer:
			s.KeptBy[v.ReasonName()]++
		}
	}
	return nil
}

// interFill runs deferred replay inside `sluice run`: while the beam is off
// (the fill planner's accelerator state, fill.Config), and, with
// replay.inter_fill, while every input has been idle that long. It stops a
// pass as soon as the beam returns, or data returns with no beam state
// saying the beam is off. A stopped pass leaves every event it did not
// commit deferred, so the next decides it exactly once (Replay).
type interFill struct {
	n     *Node
	parts *Parts

	mu     sync.Mutex
	chain  Decider
	cancel context.CancelFunc
	done   chan struct{}
	quit   chan struct{}
	// watched is closed when watch returns: after it no pass can begin (and
	// open a chain stop would not close).
	watched chan struct{}
	st      ReplayStatus
	armed   bool // a pass may start: set when data arrived since the last pass
	// early: watch opens the replay chain before anything else (fill
	// planning: the first inter-fill starts replaying at once).
	early bool
	// beam is the accelerator's state as the fill planner last saw it
	// (beamUnknown without a planner); storedAt is the deferred events
	// the node had stored when the current or last pass began, so that a
	// beam-off pass that ended starts again only for new ones.
	beam     beamState
	storedAt uint64
	begun    bool // a pass began since the beam was last on
	// rate is the replay rate measured over the passes (events/s,
	// smoothed; 0: none measured yet).
	rate float64
}

// beamState is what the fill planner says of the beam.
type beamState int

const (
	beamUnknown beamState = iota
	beamOn
	beamOff
)

// setBeam records the planner's view of the beam (the watch loop acts on it).
func (r *interFill) setBeam(b beamState) {
	r.mu.Lock()
	r.beam = b
	if b == beamOn {
		r.begun = false
	}
	r.mu.Unlock()
}

// replayRate is the measured replay rate (0: none yet).
func (r *interFill) replayRate() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rate
}

// prepare starts the replay chain ahead of the first pass, so that the
// first inter-fill does not spend its start waiting for plugin processes.
// watch calls it first (so stop, waiting for watch, waits for it too),
// without the lock: /status is not held up meanwhile.
func (r *interFill) prepare(ctx context.Context) {
	c, err := r.parts.NewReplayChain(ctx)
	if err != nil {
		r.n.log.Error("inter-fill replay: cannot start the replay chain", "err", err)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.chain != nil { // cannot happen: only watch opens it
		c.Close()
		return
	}
	r.chain = c
}

func newInterFill(n *Node, parts *Parts) *interFill {
	return &interFill{n: n, parts: parts, quit: make(chan struct{}), watched: make(chan struct{}), armed: true, st: ReplayStatus{Enabled: true}}
}

// interFillPoll is how often the inputs' idleness is checked.
const interFillPoll = 100 * time.Millisecond

// watch starts and stops replay passes until stop.
func (r *interFill) watch(ctx context.Context, allIdle func(time.Duration) bool) {
	defer close(r.watched)
	if r.early {
		r.prepare(ctx)
	}
	t := time.NewTicker(interFillPoll)
	defer t.Stop()
	idle := r.n.cfg.Replay.InterFill
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.quit:
			return
		case <-t.C:
		}
		r.mu.Lock()
		active := r.cancel != nil
		armed := r.armed
		beam, storedAt, begun := r.beam, r.storedAt, r.begun
		r.mu.Unlock()
		switch beam {
		case beamOn:
			if active {
				r.n.log.Info("inter-fill replay: the beam is back; stopping replay")
				r.halt()
			}
			continue
		case beamOff:
			// Data arriving does not stop it: the beam is off. A pass
			// that ended (the backlog replayed) starts again for events
			// deferred since it began.
			if !active && (!begun || r.storedDeferred() > storedAt) {
				r.begin(ctx, "the beam is off")
			}
			continue
		}
		if idle <= 0 {
			continue
		}
		switch {
		case active && !allIdle(2*interFillPoll):
			r.n.log.Info("inter-fill replay: data returned; stopping replay")
			r.halt()
			r.mu.Lock()
			r.armed = true
			r.mu.Unlock()
		case !active && !allIdle(2*interFillPoll):
			r.mu.Lock()
			r.armed = true
			r.mu.Unlock()
		case !active && armed && allIdle(idle):
			r.begin(ctx, "inputs idle")
		}
	}
}

// storedDeferred is the deferred events the node has stored in this run.
func (r *interFill) storedDeferred() uint64 {
	f := r.n.flow
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.storedDef
}

func (r *interFill) begin(ctx context.Context, why string) {
	stored := r.storedDeferred()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.storedAt, r.begun = stored, true
	if r.chain == nil {
		c, err := r.parts.NewReplayChain(ctx)
		if err != nil {
			r.n.log.Error("inter-fill replay: cannot start the replay chain", "err", err)
			r.armed = false
			return
		}
		r.chain = c
	}
	rctx, cancel := context.WithCancel(ctx)
	r.cancel, r.done, r.armed = cancel, make(chan struct{}), false
	r.st.Active = true
	r.st.Passes++
	r.n.log.Info("inter-fill replay: " + why + "; replaying deferred events")
	go func() {
		defer close(r.done)
		var last ReplaySummary
		opts := replayOptions(r.n.cfg)
		opts.Progress = func(s ReplaySummary) {
			r.mu.Lock()
			r.st.Events += s.Replayed - last.Replayed
			r.st.Accepted += s.Accepted - last.Accepted
			r.st.Kept += s.Kept - last.Kept
			// The pass's rate so far (Replay paces itself before
			// Progress, so this is the rate it keeps), smoothed over
			// passes; a pass of one batch says little.
			if s.Batches >= 2 && s.DurationSeconds > 0 {
				pass := float64(s.Replayed) / s.DurationSeconds
				if r.rate == 0 {
					r.rate = pass
				} else {
					r.rate += 0.3 * (pass - r.rate)
				}
			}
			r.mu.Unlock()
			last = s
		}
		s, err := Replay(rctx, r.parts.ReplayStore, r.chain, opts)
		if err != nil && !errors.Is(err, context.Canceled) {
			r.n.log.Error("inter-fill replay failed", "err", err)
		}
		r.n.log.Info("inter-fill replay pass ended", "replayed", s.Replayed, "accepted", s.Accepted,
			"rejected", s.Rejected, "kept", s.Kept, "remaining", s.Remaining)
		r.mu.Lock()
		r.st.Active = false
		r.mu.Unlock()
	}()
}

// halt stops the current pass, if any, and waits for it.
func (r *interFill) halt() {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.cancel = nil
	r.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// stop ends inter-fill replay for good and closes its chain. It waits for
// watch to return first: a pass watch was beginning meanwhile would
// otherwise start a chain after it was closed, whose plugins would outlive
// the run (and log their exit after the ledger).
func (r *interFill) stop() {
	close(r.quit)
	<-r.watched
	r.halt()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.chain != nil {
		r.chain.Close()
		r.chain = nil
	}
}

func (r *interFill) status() ReplayStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.st
	if r.chain != nil {
		st.Plugins = pluginStatus(r.chain.State())
	}
	return st
}
