package plugins

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-daq/sluice/plugins/sdk"
	"github.com/sluice-daq/sluice/schemas"
)

// slot is one instance position of a stage; inst is nil while the process
// is down (it failed to restart). The stage's free channel holds each slot
// once, its extra channel once more per further call its instance takes at
// once (instance.depth); mu guards
// inst, failures and down among those calls: the first to find the
// process down restarts it, and only the first to see a process fail
// drops it.
type slot struct {
	mu       sync.Mutex
	inst     *instance
	failures int          // consecutive failures, for the back-off
	down     string       // why inst was dropped: the restart's reason
	pid      atomic.Int64 // inst's process id, 0 while down; readable without owning the slot
}

func (sl *slot) set(in *instance) {
	sl.inst = in
	if in == nil {
		sl.pid.Store(0)
	} else {
		sl.pid.Store(int64(in.pid))
	}
}

type stage struct {
	cfg      StageConfig
	icfg     *instanceConfig
	desc     sdk.Description
	id       schemas.PluginID // what the stage's verdicts name as their plugin (provenance)
	log      *slog.Logger
	m        *metrics
	slots    []*slot
	free     chan *slot      // each slot once: a call goes to an idle instance first
	extra    chan *slot      // each slot depth-1 times: further calls when every instance has one
	depth    int             // calls in flight per slot (instance.depth)
	waiting  atomic.Int64    // events in batches waiting for a free slot
	counters []atomic.Uint64 // per line: firings seen by the prescale
	prescale []uint64        // per line; 0 or 1: none
	salt     uint64          // mixes the stage name into the deferral hash
	// fraction is the deferral fraction in force (float64 bits): the
	// configured one until Chain.SetDeferralFraction changes it.
	fraction atomic.Uint64
	cnt      counters // what the stage did, for State
	shadow   *shadow  // nil: the stage has no shadow plugin
	order    turns    // batches' turns to apply the prescales (WithBatchOrder)
}

// newStage starts a stage of cfg, whose defaults NewChain filled in.
func newStage(ctx context.Context, cfg StageConfig, opts Options, m *metrics) (*stage, error) {
	s := &stage{cfg: cfg, icfg: opts.instanceConfig(cfg.Plugin, cfg.Name), m: m,
		free: make(chan *slot, cfg.Instances), extra: make(chan *slot, cfg.Instances*(CallsInFlight-1))}
	s.log = s.icfg.log.With("stage", cfg.Name, "plugin_path", cfg.Plugin)
	s.fraction.Store(math.Float64bits(cfg.Deferral.Fraction))
	for _, c := range cfg.Name {
		s.salt = (s.salt ^ uint64(c)) * 0x100000001B3
	}
	for i := 0; i < cfg.Instances; i++ {
		in, err := s.start(ctx)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("stage %s: %w", cfg.Name, err)
		}
		if i == 0 {
			s.desc = in.desc
			digest, err := executableDigest(in.pid, cfg.Plugin)
			if err != nil {
				in.close()
				return nil, fmt.Errorf("stage %s: %w", cfg.Name, err)
			}
			s.id = schemas.PluginID{Stage: cfg.Name, Name: in.desc.Name, Version: in.desc.Version, Digest: digest}
			if err := s.setPrescales(); err != nil {
				in.close()
				return nil, err
			}
			s.m.zero(cfg.Name, s.desc)
		}
		sl := &slot{}
		sl.set(in)
		s.slots = append(s.slots, sl)
		// A restart runs the same binary (restart checks its digest), so
		// the depth its first process negotiated holds for the slot.
		s.depth = in.depth
		s.free <- sl
		for range s.depth - 1 {
			s.extra <- sl
		}
		s.gauge(s.m.up).Inc()
	}
	if cfg.Shadow != nil {
		sh, err := newShadow(s, opts, m)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("stage %s: shadow: %w", cfg.Name, err)
		}
		s.shadow = sh
	}
	return s, nil
}

func (s *stage) setPrescales() error {
	s.prescale = make([]uint64, len(s.desc.Lines))
	s.counters = make([]atomic.Uint64, len(s.desc.Lines))
	for name, n := range s.cfg.Prescales {
		found := false
		for i, l := range s.desc.Lines {
			if l == name {
				s.prescale[i], found = uint64(n), true
			}
		}
		if !found {
			return fmt.Errorf("stage %s: prescale for line %q, which plugin %s does not have (lines: %v)", s.cfg.Name, name, s.desc.Name, s.desc.Lines)
		}
		if n == 0 {
			return fmt.Errorf("stage %s: prescale of line %q is 0; use 1 to keep every event", s.cfg.Name, name)
		}
	}
	return nil
}

// start starts and configures one plugin process.
func (s *stage) start(ctx context.Context) (*instance, error) {
	in, err := startInstance(ctx, s.icfg)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, s.icfg.startTimeout)
	defer cancel()
	if err := in.configure(cctx, s.cfg.Params); err != nil {
		in.close()
		return nil, err
	}
	if s.cfg.nice != 0 || s.cfg.idle {
		if err := renice(in.pid, s.cfg.nice, s.cfg.idle); err != nil {
			s.log.Warn("could not lower the plugin's CPU priority", "pid", in.pid, "nice", s.cfg.nice, "sched_idle", s.cfg.idle, "error", err)
		}
	}
	return in, nil
}

// decide returns one verdict per row of ev (root, or a selection of root's
// rows: the batch the caller of Chain.Decide owns); it fails only when
// ctx ends.
func (s *stage) decide(ctx context.Context, ev, root *schemas.EventBatch) ([]schemas.Verdict, error) {
	seq, ordered := batchOrder(ctx)
	if ordered {
		defer s.order.pass(seq)
	}
	n := ev.Len()
	out := make([]schemas.Verdict, n)
	for i := range out {
		out[i].Stage, out[i].Plugin = s.cfg.Name, &s.id
	}
	if b := s.cfg.Deferral.Backlog; b > 0 && s.waiting.Load() > int64(b) {
		reason := schemas.Reason{Kind: schemas.ReasonBacklog, Text: fmt.Sprintf("backlog: above %d events", b)}
		for i := range out {
			out[i].Decision, out[i].Reason = schemas.DecisionDefer, reason
		}
		s.count(outcomeDeferBacklog, out)
		return out, nil
	}
	// Rows deferred by the fraction policy are left out of what the plugin sees.
	rows := s.undeferred(ev, out)
	if len(rows) == 0 {
		s.count(outcomeDeferAll, out)
		return out, nil
	}
	sub := ev.Rec
	if len(rows) < n {
		var err error
		if sub, err = selectRows(ctx, s.icfg.mem, ev.Rec, rows); err != nil {
			return nil, err
		}
		defer sub.Release()
	}
	var job *shadowJob
	if s.shadow != nil {
		job = s.shadow.offer(root, ev, rows, sub)
	}
	res, outcome, err := s.call(ctx, sub)
	if s.shadow != nil {
		s.shadow.finish(job, res, outcome, err)
	}
	if err != nil {
		return nil, err
	}
	for j, row := range rows {
		res[j].Stage, res[j].Plugin, res[j].Fired = s.cfg.Name, &s.id, res[j].Lines
		out[row] = res[j]
	}
	if ordered && len(s.prescale) > 0 {
		if err := s.order.wait(ctx, seq); err != nil {
			return nil, err
		}
	}
	s.applyPrescales(rows, out)
	s.count(outcome, out)
	return out, nil
}

// undeferred marks the rows the fraction policy defers and returns the others.
func (s *stage) undeferred(ev *schemas.EventBatch, out []schemas.Verdict) []int {
	rows := make([]int, 0, len(out))
	f := math.Float64frombits(s.fraction.Load())
	for i := range out {
		// splitmix64 of the event id: uniform in [0, 2^64), fixed per event.
		z := ev.EventID(i) ^ s.salt + 0x9E3779B97F4A7C15
		z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
		z = (z ^ z>>27) * 0x94D049BB133111EB
		z ^= z >> 31
		if f > 0 && float64(z>>11)/(1<<53) < f {
			out[i].Decision, out[i].Reason = schemas.DecisionDefer, reasonFraction
			continue
		}
		rows = append(rows, i)
	}
	return rows
}

// reasonFraction is the reason of the events the fraction policy defers.
var reasonFraction = schemas.Reason{Kind: schemas.ReasonFraction, Text: "fraction"}

// call runs rec on a free instance, restarting crashed or hung processes
// and resending, up to MaxAttempts times. After the last failure every
// event is deferred with the reason and StatusTriggerError, and the outcome
// is outcomeFailed.
func (s *stage) call(ctx context.Context, rec arrow.RecordBatch) ([]schemas.Verdict, string, error) {
	return s.callOn(ctx, int(rec.NumRows()), rec, nil)
}

// callLeased is call for a shadow's batch, read only while l holds it:
// errReleased when its owner released it before it was sent, or when the
// plugin returned an error on it after that (what it read may not have
// been the batch).
func (s *stage) callLeased(ctx context.Context, l *lease) ([]schemas.Verdict, string, error) {
	return s.callOn(ctx, l.rows, nil, l)
}

// callOn is call on rec, or on l's batch when l is not nil; n is its rows.
func (s *stage) callOn(ctx context.Context, n int, rec arrow.RecordBatch, l *lease) ([]schemas.Verdict, string, error) {
	g := s.gauge(s.m.backlog)
	s.waiting.Add(int64(n))
	g.Add(float64(n))
	var sl *slot
	from := s.free
	select {
	case sl = <-s.free: // an instance with no call: the batch is decided at once
	default:
		select {
		case sl = <-s.free:
		case sl = <-s.extra:
			from = s.extra
		case <-ctx.Done():
		}
	}
	s.waiting.Add(-int64(n))
	g.Sub(float64(n))
	if sl == nil {
		return nil, "", ctx.Err()
	}
	defer func() { from <- sl }()
	var lastErr error
	for attempt := 1; attempt <= s.cfg.MaxAttempts; attempt++ {
		sl.mu.Lock()
		if sl.inst == nil {
			if err := s.restart(ctx, sl); err != nil {
				sl.mu.Unlock()
				if ctx.Err() != nil {
					return nil, "", ctx.Err()
				}
				lastErr = err
				continue
			}
		}
		in := sl.inst
		sl.mu.Unlock()
		t0 := time.Now()
		cctx, cancel := context.WithTimeout(ctx, s.cfg.Deadline)
		res, sentBy, err := in.decide(cctx, n, rec, l)
		cancel()
		if err == nil {
			s.cnt.calls.Add(1)
			s.hist().Observe(time.Since(t0).Seconds())
			s.m.transport.WithLabelValues(s.cfg.Name, s.desc.Name, sentBy).Inc()
			sl.mu.Lock()
			if sl.inst == in {
				sl.failures = 0
			}
			sl.mu.Unlock()
			return res, outcomeDecided, nil
		}
		if ctx.Err() != nil {
			// The caller gave up (the node is stopping): the batch is neither
			// failed nor done, and the process may be mid-call.
			s.dropIf(sl, in, reasonCancelled)
			return nil, "", ctx.Err()
		}
		if errors.Is(err, errReleased) {
			return nil, "", err
		}
		reason := s.classify(in, err)
		if reason == reasonError && l != nil && l.wasRevoked() {
			// Not the plugin's failure: it read a batch whose memory its
			// owner had taken back.
			return nil, "", errReleased
		}
		lastErr = err
		s.cnt.failures.Add(1)
		s.m.failures.WithLabelValues(s.cfg.Name, s.desc.Name, reason).Inc()
		s.log.Warn("trigger plugin failed on a batch", "plugin", s.desc.Name, "pid", in.pid,
			"attempt", attempt, "of", s.cfg.MaxAttempts, "reason", reason, "events", n, "error", err)
		if reason != reasonError {
			// The other calls in flight on the process fail with it (and
			// are tried again, each on its own attempts): one restart.
			s.dropIf(sl, in, reason)
		}
	}
	reason := schemas.Reason{Kind: schemas.ReasonTriggerError,
		Text: fmt.Sprintf("trigger-error: stage %s plugin %s failed %d times on this batch: %v", s.cfg.Name, s.desc.Name, s.cfg.MaxAttempts, lastErr)}
	if s.cfg.shadow {
		// Nothing is deferred: production decides the batch as usual.
		s.log.Warn("shadow plugin failed on a batch: not compared (shadow_skipped failed)", "plugin", s.desc.Name, "events", n, "error", lastErr)
	} else {
		s.log.Error("batch deferred after repeated trigger failures", "plugin", s.desc.Name, "events", n, "error", lastErr)
	}
	res := make([]schemas.Verdict, n)
	for i := range res {
		res[i] = schemas.Verdict{Decision: schemas.DecisionDefer, Reason: reason, Status: schemas.StatusTriggerError}
	}
	return res, outcomeFailed, nil
}

// classify says why a call failed: the deadline passed, the process or its
// connection died, or the plugin itself returned an error.
func (s *stage) classify(in *instance, err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded:
		return reasonDeadline
	case in.exited() || status.Code(err) == codes.Unavailable || status.Code(err) == codes.Canceled:
		return reasonCrash
	}
	return reasonError
}

// dropIf drops the slot's process if it is still in, the process the
// failed call ran on (another call in flight on it may have dropped it,
// and a third restarted the slot, already).
func (s *stage) dropIf(sl *slot, in *instance, reason string) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.inst == in {
		s.drop(sl, reason)
	}
}

// drop kills the slot's process; the next attempt restarts it. The caller
// holds sl.mu.
func (s *stage) drop(sl *slot, reason string) {
	sl.inst.kill()
	sl.set(nil)
	sl.down = reason
	if reason != reasonCancelled {
		sl.failures++
	}
	s.gauge(s.m.up).Dec()
}

// restart starts a new process in the slot after the back-off; the caller
// holds sl.mu.
func (s *stage) restart(ctx context.Context, sl *slot) error {
	wait := s.cfg.RestartBackoff << min(max(sl.failures-1, 0), 20)
	wait = min(wait, s.cfg.MaxRestartBackoff)
	select {
	case <-time.After(wait):
	case <-ctx.Done():
		return ctx.Err()
	}
	in, err := s.start(ctx)
	if err != nil {
		sl.failures++
		s.log.Error("restarting trigger plugin failed", "error", err, "backoff", wait)
		return err
	}
	if in.desc.Name != s.desc.Name || len(in.desc.Lines) != len(s.desc.Lines) {
		in.close()
		sl.failures++
		return fmt.Errorf("plugin %s changed its description on restart (%s, %d lines)", s.cfg.Plugin, in.desc.Name, len(in.desc.Lines))
	}
	// The stored events name the binary the stage started with: a
	// replaced binary is not run under its predecessor's name.
	if d, err := executableDigest(in.pid, s.cfg.Plugin); err != nil || d != s.id.Digest || in.desc.Version != s.id.Version {
		in.close()
		sl.failures++
		if err != nil {
			return err
		}
		return fmt.Errorf("plugin %s changed on restart (version %q sha256 %s; the stage started with version %q sha256 %s)",
			s.cfg.Plugin, in.desc.Version, d, s.id.Version, s.id.Digest)
	}
	s.log.Info("trigger plugin restarted", "plugin", s.desc.Name, "pid", in.pid, "reason", sl.down)
	s.m.restarts.WithLabelValues(s.cfg.Name, s.desc.Name, sl.down).Inc()
	s.cnt.restarts.Add(1)
	sl.set(in)
	s.gauge(s.m.up).Inc()
	return nil
}

// applyPrescales keeps 1 in N firings of each prescaled line among rows;
// an accepted event left with no line is rejected.
func (s *stage) applyPrescales(rows []int, out []schemas.Verdict) {
	rejected := 0
	defer func() { s.cnt.prescaled.Add(uint64(rejected)) }()
	for _, row := range rows {
		r := &out[row]
		if r.Decision != schemas.DecisionAccept || r.Lines == 0 {
			continue
		}
		for b, n := range s.prescale {
			if n <= 1 || r.Lines&(1<<b) == 0 {
				continue
			}
			// Counter-based: the 1st, (N+1)th, (2N+1)th … firing is kept.
			if (s.counters[b].Add(1)-1)%n != 0 {
				r.Lines &^= 1 << b
				s.m.prescaled.WithLabelValues(s.cfg.Name, s.desc.Name, s.desc.Lines[b]).Inc()
			}
		}
		if r.Lines == 0 {
			r.Decision, r.Reason = schemas.DecisionReject, reasonPrescaled
			rejected++
		}
	}
}

// reasonPrescaled is the reason of the events whose every fired line the
// prescales removed.
var reasonPrescaled = schemas.Reason{Kind: schemas.ReasonPrescaled, Text: "prescaled"}

// count updates the batch, decision and line counters.
func (s *stage) count(outcome string, out []schemas.Verdict) {
	s.m.batches.WithLabelValues(s.cfg.Name, s.desc.Name, outcome).Inc()
	var by [4]int
	var lines [schemas.MaxLines]int
	for _, r := range out {
		by[r.Decision&3]++
		if r.Decision == schemas.DecisionAccept {
			for b := range schemas.FiredLines(r.Lines, s.desc.Lines) {
				lines[b]++
			}
		}
	}
	for d := schemas.DecisionAccept; d <= schemas.DecisionDefer; d++ {
		if by[d] > 0 {
			s.cnt.decided[d].Add(uint64(by[d]))
			s.m.events.WithLabelValues(s.cfg.Name, s.desc.Name, d.String()).Add(float64(by[d]))
		}
	}
	for b, k := range lines {
		if k == 0 {
			continue
		}
		s.cnt.lines[b].Add(uint64(k))
		if b < len(s.desc.Lines) {
			s.m.lineEvents.WithLabelValues(s.cfg.Name, s.desc.Name, s.desc.Lines[b]).Add(float64(k))
		}
	}
}

func (s *stage) gauge(v *prometheus.GaugeVec) prometheus.Gauge {
	return v.WithLabelValues(s.cfg.Name, s.desc.Name)
}

func (s *stage) hist() prometheus.Observer {
	return s.m.callTime.WithLabelValues(s.cfg.Name, s.desc.Name)
}

// close stops the stage's processes; it waits for batches in flight.
func (s *stage) close() {
	if s.shadow != nil {
		s.shadow.close()
	}
	// Every slot's every call back: no batch in flight.
	for range s.slots {
		<-s.free
		for range s.depth - 1 {
			<-s.extra
		}
	}
	for _, sl := range s.slots {
		if sl.inst != nil {
			sl.inst.close()
			sl.set(nil)
			s.gauge(s.m.up).Dec()
		}
	}
}
