package plugins

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/schemas"
)

// ShadowConfig is a stage's shadow (canary) plugin (`shadow:` of a stage):
// another binary, or another version of the same one, with its own
// parameters. It gets every batch the stage's plugin decides (the events
// the stage's deferral policies left to the plugin), read where the
// stage's plugin reads it (the arena), and the host compares the two
// plugins' decisions (Comparison); the shadow's decisions are never used.
// It cannot slow the stage: a batch arriving while Queue batches already
// wait for it is skipped for the shadow (counted), a batch its owner
// releases before the shadow has decided it is skipped too (the owner
// never waits for it), a shadow call past Deadline is abandoned and the
// process restarted, and its processes run at a lower CPU priority (Nice).
type ShadowConfig struct {
	Plugin    string            `yaml:"plugin"`    // path of the shadow plugin binary
	Params    map[string]string `yaml:"params"`    // passed to its Configure
	Instances int               `yaml:"instances"` // shadow processes, 1..MaxInstances; default 1
	// Deadline bounds each shadow Decide call; past it the process is
	// killed and restarted and the batch is skipped. Default 10 s (a
	// shadow at idle priority on a busy node waits long for a core).
	Deadline time.Duration `yaml:"deadline"`
	// Queue is how many batches may wait for a shadow process or be
	// decided by one; a batch arriving when the queue is full is skipped
	// for the shadow. Default 4. The shadow holds no memory of its own:
	// a queued batch is the production batch itself, until its owner
	// releases it.
	Queue int `yaml:"queue"`
	// StoreBytes is the payload bytes of differing events (those the
	// shadow decided otherwise than production) written to the store's
	// shadow stream per stage, from the node's start: the shadow's
	// verdict, production's decision in its reason. Past it the differing
	// events are only counted (unstored, budget_full). The writes are made
	// by the shadow's goroutines, never the production path's. Default 0:
	// none stored.
	StoreBytes conf.ByteSize `yaml:"store_bytes"`
	// Nice is the CPU priority the shadow processes run at (Linux nice
	// value, 0..19: 19 is the lowest priority), so that production plugins
	// take the cores first. Default 19; 0 keeps the node's priority.
	Nice *int `yaml:"nice"`
	// Idle runs the shadow processes under Linux's SCHED_IDLE policy: only
	// on cores that nothing else (at any nice value) wants, so a busy node
	// gives its shadow no time and skips batches for it instead. Default
	// true.
	Idle *bool `yaml:"idle"`
}

// DefaultShadow holds the values zero ShadowConfig fields take.
func DefaultShadow() ShadowConfig {
	nice, idle := 19, true
	return ShadowConfig{Instances: 1, Deadline: 10 * time.Second, Queue: 4, Nice: &nice, Idle: &idle}
}

func (s ShadowConfig) withDefaults() ShadowConfig {
	d := DefaultShadow()
	if s.Instances == 0 {
		s.Instances = d.Instances
	}
	if s.Deadline == 0 {
		s.Deadline = d.Deadline
	}
	if s.Queue == 0 {
		s.Queue = d.Queue
	}
	if s.Nice == nil {
		s.Nice = d.Nice
	}
	if s.Idle == nil {
		s.Idle = d.Idle
	}
	return s
}

func (s ShadowConfig) validate() conf.Problems {
	var ps conf.Problems
	if s.Plugin == "" {
		ps.Add("plugin", nil, "want the path of the shadow plugin binary, e.g. bin/plugins/passthrough")
	}
	if s.Instances < 1 || s.Instances > MaxInstances {
		ps.Add("instances", s.Instances, "want 1..%d shadow processes", MaxInstances)
	}
	if s.Deadline <= 0 {
		ps.Add("deadline", s.Deadline, "want a positive duration such as 10s")
	}
	if s.Queue < 1 || s.Queue > 1024 {
		ps.Add("queue", s.Queue, "want 1..1024 batches")
	}
	if s.StoreBytes < 0 || s.StoreBytes > 1<<40 {
		ps.Add("store_bytes", s.StoreBytes, "want 0 (store no differing events) .. 1TiB")
	}
	if s.Nice != nil && (*s.Nice < 0 || *s.Nice > 19) {
		ps.Add("nice", *s.Nice, "want a nice value 0..19 (19: lowest CPU priority)")
	}
	return ps
}

// Why a batch was not compared (label reason of the shadow's skipped
// counters).
const (
	skipQueueFull = "queue_full" // the shadow was behind: its queue was full
	skipFailed    = "failed"     // the shadow crashed, passed its deadline or returned an error on it
	// skipProdFailed: the production plugin failed on the batch (its
	// events deferred with StatusTriggerError): nothing to compare.
	skipProdFailed = "production_failed"
	skipStopped    = "stopped" // the chain closed before the shadow got to it
	// skipReleased: the batch's owner released it (the node stored it)
	// before the shadow had decided it; what the shadow decided, if it
	// got to it, is discarded.
	skipReleased = "released"
)

// skipReasons are the reasons, in the order State reports them.
var skipReasons = []string{skipQueueFull, skipFailed, skipProdFailed, skipStopped, skipReleased}

// Why a differing event was not written to the store's shadow stream
// (label reason of sluice_trigger_shadow_unstored_events_total).
const (
	unstoredBudget = "budget_full" // StoreBytes reached
	unstoredError  = "store_error" // the store refused the write (logged)
)

var unstoredReasons = []string{unstoredBudget, unstoredError}

// ShadowStore writes the events a stage's shadow decided otherwise than
// production to the store's shadow stream (ShadowConfig.StoreBytes): ev
// holds only those events (a copy, in Go memory, released after it
// returns), verdicts the shadow's, one per row. It returns the bytes
// stored. Called from the shadows' goroutines, never the production
// path's; it must be safe for concurrent use.
type ShadowStore func(ev *schemas.EventBatch, verdicts []schemas.Verdict) (int64, error)

// shadow runs a stage's shadow plugin beside it. A batch the stage's
// plugin is to decide is leased to the shadow (offer): its processes read
// it where production's read it, without a copy, until the shadow is done
// with it or the batch's owner releases it (see lease), and once the
// stage's plugin has decided it (finish) it waits for a shadow process.
// Tokens bound the batches queued or being decided to Queue.
type shadow struct {
	prod   *stage // the production stage it shadows
	st     *stage // the shadow plugin's own stage: processes, restarts, metrics
	tokens chan struct{}
	queue  chan *shadowJob
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the workers
	alive  sync.WaitGroup // the jobs (each holds a token)

	store ShadowStore // nil: differing events are not stored
	mem   memory.Allocator

	mu       sync.Mutex
	closed   bool
	cmp      *Comparison
	skipped  map[string][2]uint64 // batches, events
	stored   [2]uint64            // events, payload bytes written to the shadow stream
	reserved int64                // payload bytes of StoreBytes taken: written or being written
	unstored map[string]uint64    // differing events not written, by reason
}

// shadowJob is one batch the production plugin decides, leased to the
// shadow, with (once finished) production's decisions.
type shadowJob struct {
	lease *lease
	ids   []uint64
	prod  []schemas.Verdict
}

// newShadow starts the shadow of stage prod. Its processes map the same
// arena as production's (opts.Arena).
func newShadow(prod *stage, opts Options, m *metrics) (*shadow, error) {
	c := prod.cfg.Shadow
	cfg := StageConfig{Name: prod.cfg.Name + "/shadow", Plugin: c.Plugin, Params: c.Params, Instances: c.Instances,
		Deadline: c.Deadline, When: prod.cfg.When, MaxAttempts: 1,
		RestartBackoff: prod.cfg.RestartBackoff, MaxRestartBackoff: prod.cfg.MaxRestartBackoff, nice: *c.Nice, idle: *c.Idle, shadow: true}
	ctx, cancel := context.WithCancel(context.Background())
	st, err := newStage(ctx, cfg, opts, m)
	if err != nil {
		cancel()
		return nil, err
	}
	sh := &shadow{prod: prod, st: st, tokens: make(chan struct{}, c.Queue), queue: make(chan *shadowJob, c.Queue),
		ctx: ctx, cancel: cancel, cmp: NewComparison(prod.desc.Lines, st.desc.Lines), skipped: map[string][2]uint64{},
		unstored: map[string]uint64{}, mem: memory.NewGoAllocator()}
	if c.StoreBytes > 0 {
		sh.store = opts.ShadowStore
	}
	m.zeroShadow(prod.cfg.Name)
	for range c.Instances {
		sh.wg.Add(1)
		go sh.work()
	}
	return sh, nil
}

// offer leases rec (rows of ev), the batch the production plugin is about
// to decide, to the shadow until root (the batch ev is part of, which the
// caller of Chain.Decide owns) is released; the caller passes the result
// to finish once its plugin has decided. It never waits: when Queue
// batches are already queued or being decided the batch is skipped for
// the shadow (nil).
func (sh *shadow) offer(root, ev *schemas.EventBatch, rows []int, rec arrow.RecordBatch) *shadowJob {
	select {
	case sh.tokens <- struct{}{}:
	default:
		sh.skip(skipQueueFull, len(rows))
		return nil
	}
	sh.alive.Add(1)
	j := &shadowJob{lease: newLease(rec), ids: make([]uint64, len(rows))}
	for k, row := range rows {
		j.ids[k] = ev.EventID(row)
	}
	root.OnRelease(j.lease.revoke)
	return j
}

// finish queues the batch for the shadow's processes with the production
// decisions res (outcome: how the stage's call went; err: the call's
// error). It never waits.
func (sh *shadow) finish(j *shadowJob, res []schemas.Verdict, outcome string, err error) {
	if j == nil {
		return
	}
	reason := ""
	switch {
	case err != nil:
		reason = skipStopped
	case outcome != outcomeDecided:
		// The production plugin failed on it: there is no decision to compare.
		reason = skipProdFailed
	}
	if reason == "" {
		j.prod = make([]schemas.Verdict, len(j.ids))
		for k := range j.prod {
			j.prod[k] = schemas.Verdict{Decision: res[k].Decision, Lines: res[k].Lines}
		}
		sh.mu.Lock()
		if !sh.closed {
			sh.queue <- j // never blocks: a token is held for each job
			sh.mu.Unlock()
			return
		}
		sh.mu.Unlock()
		reason = skipStopped
	}
	sh.drop(j, reason)
}

// drop skips a job for reason, ending its lease and freeing its token.
func (sh *shadow) drop(j *shadowJob, reason string) {
	j.lease.end()
	<-sh.tokens
	sh.alive.Done()
	sh.skip(reason, len(j.ids))
}

// work decides queued batches on one shadow process until the chain closes.
func (sh *shadow) work() {
	defer sh.wg.Done()
	for {
		select {
		case <-sh.ctx.Done():
			return
		case b := <-sh.queue:
			sh.decide(b)
		}
	}
}

func (sh *shadow) decide(b *shadowJob) {
	if b.lease.wasRevoked() {
		// Stored before a shadow process was free: not even sent.
		sh.drop(b, skipReleased)
		return
	}
	res, outcome, err := sh.st.callLeased(sh.ctx, b.lease)
	var diff *differing
	var overBudget, copyFailed int
	if err == nil && outcome == outcomeDecided {
		// Copied while the lease still holds the batch: its memory goes
		// back to production at the release.
		diff, overBudget, copyFailed = sh.copyDiffering(b, res)
	}
	revoked := b.lease.end()
	if diff != nil && (revoked || err != nil) {
		sh.giveBack(diff)
		diff.rec.Release()
		diff = nil
	}
	switch {
	case revoked || errors.Is(err, errReleased):
		// The owner had the batch back before the shadow was done (even
		// when it then decided it: the plugin may have read memory the
		// builder already reused).
		sh.drop(b, skipReleased)
		return
	case err != nil:
		sh.drop(b, skipStopped)
		return
	case outcome != outcomeDecided:
		sh.drop(b, skipFailed)
		return
	}
	<-sh.tokens
	sh.alive.Done()
	sh.st.count(outcome, res)
	m := sh.st.m
	name := sh.prod.cfg.Name
	sh.mu.Lock()
	before := sh.cmp.Result()
	for j, id := range b.ids {
		sh.cmp.Add(id, b.prod[j], res[j])
	}
	after := sh.cmp.Result()
	sh.mu.Unlock()
	// Only a batch compared counts its differing events unstored: one
	// dropped above is counted skipped (a copy cut off by the release at
	// the run's end failed, and counted both).
	if overBudget > 0 {
		sh.unstore(unstoredBudget, overBudget)
	}
	if copyFailed > 0 {
		sh.unstore(unstoredError, copyFailed)
	}
	if diff != nil {
		sh.write(diff)
	}
	m.shadowCompared.WithLabelValues(name).Add(float64(after.Compared - before.Compared))
	m.shadowAgreeing.WithLabelValues(name).Add(float64(after.Agreeing - before.Agreeing))
	for _, p := range after.Differing {
		if d := p.Events - pairEvents(before.Differing, p.Production, p.Shadow); d > 0 {
			m.shadowDiffering.WithLabelValues(name, p.Production.String(), p.Shadow.String()).Add(float64(d))
		}
	}
	for _, l := range after.Lines {
		was := lineDiff(before.Lines, l.Line)
		if d := l.OnlyProduction - was.OnlyProduction; d > 0 {
			m.shadowLines.WithLabelValues(name, l.Line, "production").Add(float64(d))
		}
		if d := l.OnlyShadow - was.OnlyShadow; d > 0 {
			m.shadowLines.WithLabelValues(name, l.Line, "shadow").Add(float64(d))
		}
	}
}

// differing is a copy of the events the shadow decided otherwise than
// production, with the shadow's verdicts, for the store's shadow stream.
type differing struct {
	rec      arrow.RecordBatch
	verdicts []schemas.Verdict
	payload  int64
}

// copyDiffering copies b's events on which res (the shadow's verdicts)
// differs from production into Go memory, within what is left of
// StoreBytes (the events past it are counted unstored); nil when none is
// to be stored, or when the owner already released the batch.
func (sh *shadow) copyDiffering(b *shadowJob, res []schemas.Verdict) (d *differing, budget, failed int) {
	if sh.store == nil {
		return nil, 0, 0
	}
	var rows []int
	for j := range b.ids {
		if sh.cmp.Differs(b.prod[j], res[j]) {
			rows = append(rows, j)
		}
	}
	if len(rows) == 0 {
		return nil, 0, 0
	}
	rec, ok := b.lease.acquire()
	if !ok {
		return nil, 0, 0
	}
	defer b.lease.placed()
	ev, err := schemas.NewEventBatch(rec)
	if err != nil {
		return nil, 0, len(rows)
	}
	// The budget is taken here, before the write: several shadow
	// processes never pass it together.
	sh.mu.Lock()
	left := int64(sh.prod.cfg.Shadow.StoreBytes) - sh.reserved
	kept := rows[:0:0]
	var taken int64
	for _, r := range rows {
		var size int64
		for g := range ev.Groups {
			size += int64(len(ev.GroupPayload(g, r)))
		}
		if size > left {
			continue
		}
		left -= size
		taken += size
		kept = append(kept, r)
	}
	sh.reserved += taken
	sh.mu.Unlock()
	budget = len(rows) - len(kept)
	if len(kept) == 0 {
		return nil, budget, 0
	}
	d = &differing{verdicts: make([]schemas.Verdict, len(kept)), payload: taken}
	if d.rec, err = selectRows(sh.ctx, sh.mem, rec, kept); err != nil {
		sh.giveBack(d)
		return nil, budget, len(kept)
	}
	for k, r := range kept {
		p, v := b.prod[r], res[r]
		var lines []string
		for _, name := range schemas.FiredLines(p.Lines, sh.prod.desc.Lines) {
			lines = append(lines, name)
		}
		text := "production: " + p.Decision.String()
		if p.Decision == schemas.DecisionAccept && len(lines) > 0 {
			text += " (" + strings.Join(lines, ",") + ")"
		}
		d.verdicts[k] = schemas.Verdict{Decision: v.Decision, Lines: v.Lines, Stage: sh.st.cfg.Name, Plugin: &sh.st.id,
			Reason: schemas.Reason{Kind: schemas.ReasonPlugin, Plugin: sh.st.desc.Name, Text: text}}
	}
	return d, budget, 0
}

// write stores d in the store's shadow stream and releases it.
func (sh *shadow) write(d *differing) {
	defer d.rec.Release()
	ev, err := schemas.NewEventBatch(d.rec)
	if err == nil {
		_, err = sh.store(ev, d.verdicts)
	}
	if err != nil {
		sh.st.log.Warn("shadow: the store refused differing events; not stored (unstored store_error)", "events", len(d.verdicts), "error", err)
		sh.giveBack(d)
		sh.unstore(unstoredError, len(d.verdicts))
		return
	}
	sh.mu.Lock()
	sh.stored[0] += uint64(len(d.verdicts))
	sh.stored[1] += uint64(d.payload)
	sh.mu.Unlock()
	sh.st.m.shadowStored.WithLabelValues(sh.prod.cfg.Name).Add(float64(len(d.verdicts)))
}

// giveBack returns d's share of StoreBytes: it was not written.
func (sh *shadow) giveBack(d *differing) {
	sh.mu.Lock()
	sh.reserved -= d.payload
	sh.mu.Unlock()
}

func (sh *shadow) unstore(reason string, events int) {
	sh.mu.Lock()
	sh.unstored[reason] += uint64(events)
	sh.mu.Unlock()
	sh.st.m.shadowUnstored.WithLabelValues(sh.prod.cfg.Name, reason).Add(float64(events))
}

func pairEvents(ps []DecisionPair, p, s schemas.Decision) uint64 {
	for _, x := range ps {
		if x.Production == p && x.Shadow == s {
			return x.Events
		}
	}
	return 0
}

func lineDiff(ls []LineDiff, line string) LineDiff {
	for _, l := range ls {
		if l.Line == line {
			return l
		}
	}
	return LineDiff{}
}

func (sh *shadow) skip(reason string, events int) {
	sh.mu.Lock()
	c := sh.skipped[reason]
	c[0]++
	c[1] += uint64(events)
	sh.skipped[reason] = c
	sh.mu.Unlock()
	sh.st.m.shadowSkipped.WithLabelValues(sh.prod.cfg.Name, reason).Inc()
	sh.st.m.shadowSkippedEvents.WithLabelValues(sh.prod.cfg.Name, reason).Add(float64(events))
}

// close stops the shadow: the call in flight is abandoned and the batches
// still queued are counted as skipped (stopped).
func (sh *shadow) close() {
	sh.cancel()
	sh.wg.Wait()
	sh.mu.Lock()
	sh.closed = true
	sh.mu.Unlock()
	for {
		select {
		case j := <-sh.queue:
			sh.drop(j, skipStopped)
			continue
		default:
		}
		break
	}
	// Batches the production stage still decides hand their leases back
	// (finish drops them now) before the processes go.
	sh.alive.Wait()
	sh.st.close()
}

// ShadowState is what a stage's shadow did so far.
type ShadowState struct {
	// Stage is the shadow's own processes and decisions (its Name is the
	// production stage's with "/shadow" added).
	Stage StageState
	ShadowDiff
	// Skipped counts the batches and events the shadow did not compare,
	// by reason: queue_full (it was behind), failed (it crashed, passed
	// its deadline or returned an error), production_failed (the stage's
	// own plugin failed on the batch), stopped (the chain closed first),
	// released (the batch's owner released it before the shadow had
	// decided it).
	Skipped []ShadowSkip
	// Stored and StoredBytes are the differing events written to the
	// store's shadow stream and their payload bytes
	// (ShadowConfig.StoreBytes); Unstored the differing events not
	// written, by reason (budget_full, store_error), in that order.
	Stored, StoredBytes uint64
	Unstored            []ShadowUnstored
}

// ShadowUnstored counts the differing events not written to the store's
// shadow stream for one reason.
type ShadowUnstored struct {
	Reason string
	Events uint64
}

// ShadowSkip counts the batches skipped for a shadow for one reason.
type ShadowSkip struct {
	Reason          string
	Batches, Events uint64
}

// SkippedEvents is the number of events skipped for any reason.
func (s *ShadowState) SkippedEvents() uint64 {
	var n uint64
	for _, k := range s.Skipped {
		n += k.Events
	}
	return n
}

func (sh *shadow) state() *ShadowState {
	st := &ShadowState{Stage: sh.st.state()}
	sh.mu.Lock()
	st.ShadowDiff = sh.cmp.Result()
	for _, r := range skipReasons {
		if c, ok := sh.skipped[r]; ok {
			st.Skipped = append(st.Skipped, ShadowSkip{Reason: r, Batches: c[0], Events: c[1]})
		}
	}
	st.Stored, st.StoredBytes = sh.stored[0], sh.stored[1]
	for _, r := range unstoredReasons {
		if n := sh.unstored[r]; n > 0 {
			st.Unstored = append(st.Unstored, ShadowUnstored{Reason: r, Events: n})
		}
	}
	sh.mu.Unlock()
	return st
}
