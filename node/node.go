// Package node is the sluice node's runtime: it wires readout inputs, the
// event builder, the online trigger chain and the event store into one
// bounded pipeline, controls the run (idle → configured → running →
// draining → stopped), keeps the end-of-run ledger, and serves metrics and
// status over HTTP.
//
// Every stage is bounded: the builder by open events and buffered bytes,
// the batches after it by the byteGate (half the memory budget) and by the
// queue depth, the store by its disk budget. When a stage is full the one
// before it waits, down to the inputs, which throttle their senders.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-daq/sluice/builder"
	"github.com/sluice-daq/sluice/node/config"
	"github.com/sluice-daq/sluice/node/farm"
	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/plugins"
)

// Options are the node's collaborators.
type Options struct {
	Logger  *slog.Logger      // default: slog.Default()
	Limiter *RateLimitHandler // the logger's rate limiter, for its metric (optional)
	// Open opens the run's parts (store, chains, inputs, emulators) once
	// the node is configured; reg receives their metrics. Default OpenParts.
	Open func(ctx context.Context, cfg *config.Config, reg prometheus.Registerer, log *slog.Logger) (*Parts, error)
}

// Node runs one run of the pipeline. Create it with New, then call Run
// once; Stop (or POST /run/stop) drains it.
type Node struct {
	cfg   *config.Config
	opts  Options
	log   *slog.Logger
	rc    *runControl
	reg   *prometheus.Registry
	rates rateMeter
	// direct: the store wrote its segment files with O_DIRECT at the last
	// look (the node logs the file system's refusal once).
	direct atomic.Bool

	mu      sync.Mutex // guards the fields below until the run ends
	started time.Time
	running time.Time // when the inputs opened
	parts   *Parts
	inputs  *runningInputs
	builder eventBuilder
	errs    []error
	ended   time.Time
	httpSrv *httpServer
	final   *Ledger

	flow *flow
	gate *byteGate
	// replacedSoFar is the stored events this run's writes replaced so
	// far, for the warning's running total (the store goroutine's alone).
	replacedSoFar uint64
	peaks         memoryPeaks
	// farm is the node's part in a farm (nil: the node runs alone);
	// farmCtx is Run's context, for the farm's reports.
	farm    *farmNode
	farmCtx context.Context
	// drainExpired is closed node.drain_timeout after the drain began.
	drainExpired chan struct{}
	queue        chan batch
	replay       *interFill
	fill         *fillPlanner
	watch        *watcher // set in Run before the stages start
	lat          *latencies
}

// New prepares a node for cfg (already validated): its registry and
// run control; nothing is opened yet. The state is configured.
func New(cfg *config.Config, opts Options) (*Node, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Open == nil {
		opts.Open = OpenParts
	}
	n := &Node{cfg: cfg, opts: opts, flow: newFlow(), drainExpired: make(chan struct{})}
	n.log = opts.Logger.With("node", cfg.Node.ID, "run", cfg.Run)
	n.rc = newRunControl(func(s State) { n.log.Info("run state", "state", s.String()) })
	// Metrics label inputs by URI: off loopback a file:// input's path is
	// hidden there as in /status.
	hidePaths := !cfg.HTTP.Loopback() && !cfg.HTTP.ShowPaths
	n.reg = newRegistry(func() Status {
		s := n.Status()
		if hidePaths {
			s = s.withoutPaths()
		}
		return s
	})
	// Half the batches share for batches between the builder and the
	// store: the arena (the whole share) also holds the batches being
	// built and the stages' selections for the next stage; a full arena
	// falls back to the Go heap (measured: the gate at the whole share
	// let the heap pass its part by 120 MiB in the demo).
	n.lat = newLatencies(n.reg)
	n.gate = newByteGate(int64(cfg.Memory().Batches / 2))
	n.queue = make(chan batch, cfg.Builder.QueueBatches)
	if err := n.rc.advance(StateConfigured); err != nil {
		return nil, err
	}
	return n, nil
}

// HTTPAddr is the address the HTTP endpoint listens on ("" when off or
// not started yet).
func (n *Node) HTTPAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.httpSrv == nil {
		return ""
	}
	return n.httpSrv.Addr()
}

// Stop requests a drain: inputs stop, open events are flushed, the chain
// finishes and the store flushes; Run then returns. Safe to call any time.
func (n *Node) Stop() {
	if n.rc.requestDrain() {
		n.log.Info("drain requested")
	}
}

// fail records an error that makes the run fail (non-zero exit) and starts
// a drain.
func (n *Node) fail(err error) {
	n.mu.Lock()
	n.errs = append(n.errs, err)
	n.mu.Unlock()
	n.log.Error("run error", "err", err)
	n.Stop()
}

// Run opens the parts, runs until a drain is requested, the inputs end or
// ctx ends (a hard abort: the ledger will show what was in flight), drains,
// and returns the final ledger. The error is non-nil when something failed
// or the ledger does not balance.
func (n *Node) Run(ctx context.Context) (Ledger, error) {
	n.mu.Lock()
	n.started = time.Now()
	n.mu.Unlock()
	if a := n.cfg.HTTP.Address; a != "off" {
		tok, err := n.cfg.HTTP.Token()
		if err != nil {
			return n.failedStart(nil, fmt.Errorf("http.token_file %s: %w", n.cfg.HTTP.TokenFile, err))
		}
		acc := httpAccess{Token: tok, Loopback: n.cfg.HTTP.Loopback()}
		acc.ShowPaths = acc.Loopback || n.cfg.HTTP.ShowPaths
		srv, err := startHTTP(a, acc, newHTTPHandler(n.reg, n, acc, n.log), n.log)
		if err != nil {
			return n.failedStart(nil, fmt.Errorf("http: %w", err))
		}
		n.mu.Lock()
		n.httpSrv = srv
		n.mu.Unlock()
		n.log.Info("http listening", "addr", srv.Addr())
		defer srv.shutdown()
	}
	parts, err := n.opts.Open(ctx, n.cfg, n.reg, n.log)
	if err != nil {
		return n.failedStart(nil, err)
	}
	groups, err := n.cfg.Groups()
	if err != nil {
		return n.failedStart(parts, err)
	}
	n.mu.Lock()
	n.watch = newWatcher(n.cfg.Warnings, groups, n.log)
	n.mu.Unlock()
	bc := n.cfg.Builder.Config
	bc.Groups, bc.Run, bc.Allocator = groups, n.cfg.Run, parts.BatchAllocator
	bc.MaxBufferedBytes = int64(n.cfg.Memory().Builder)
	bc.Logger = n.log
	// asFarm is the farm node once it exists: the builder reports its
	// assignments to it (none before: the farm hands them out).
	var asFarm *farmNode
	if roles, _ := n.cfg.Farm.ParsedRoles(); n.cfg.Farm.Enabled() && roles&farm.RoleBU != 0 {
		// A farm BU builds the event manager's assignments: ranges far
		// apart, delivered source by source, reassigned old ones late by
		// design. The builder tracks completeness per assignment (Expect)
		// instead of the single-node reference and late rule.
		bc.Assigned = true
		bc.OnAssignmentDone = func(r builder.AssignmentReport) { asFarm.assignmentDone(r) }
	} else if n.cfg.Farm.Enabled() {
		// An RU-only node builds nothing; its builder's reference rule is
		// off like a BU's.
		bc.SuspectDistance = math.MaxUint64
	}
	b, err := builder.New(bc)
	if err != nil {
		return n.failedStart(parts, err)
	}
	n.watch.useBuilder(b.SetAbsent, b.Absent)
	fileGroups := groups
	if n.cfg.Farm.Enabled() {
		// In a farm the other RUs read the other sources: an emulator's
		// file owes this node its own (farm.sources) only.
		fileGroups = ownGroups(groups, n.cfg.Farm.Sources)
	}
	parts.emulatorFile = func(input, file string, has []uint32) { n.watch.emulatorFile(input, file, has, fileGroups, groups) }
	n.farmCtx = ctx
	if n.cfg.Farm.Enabled() {
		f, err := n.startFarm(ctx, b)
		if err != nil {
			_ = b.Close(ctx)
			return n.failedStart(parts, err)
		}
		asFarm = f
		n.mu.Lock()
		n.farm = f
		n.mu.Unlock()
	}
	if parts.Chain != nil {
		n.flow.setChain(parts.Chain)
		// The store keeps a verdict's lines as a bitmask: record what the
		// bits are called, for `sluice store ls`.
		if ls, ok := parts.Store.(interface {
			SetLineNames(map[string][]string) error
		}); ok {
			if err := ls.SetLineNames(lineNames(parts.Chain)); err != nil {
				n.log.Warn("store: trigger line names not recorded", "err", err)
			}
		}
	}
	if k := parts.RunEventsAtStart; k > 0 {
		// Not refused: a restart after a crash legitimately reuses the run.
		n.log.Warn(reusedRunWarning(n.cfg.Run, k, n.cfg.Store.Dir, n.cfg.Rerun), "stored_events", k)
	}
	n.mu.Lock()
	n.parts, n.builder = parts, b
	n.mu.Unlock()
	l := n.pipeline(ctx, parts, b)
	err = n.result(&l)
	if l.NotStarted != "" {
		n.log.Error("run did not start", "err", err)
	} else if err != nil {
		n.log.Error("run ended", "ledger", l.String(), "err", err)
	} else {
		n.log.Info("run ended", "ledger", l.String())
	}
	return l, err
}

// drainTimeout is node.drain_timeout (a minute when not set).
func (n *Node) drainTimeout() time.Duration {
	if d := n.cfg.Node.DrainTimeout; d > 0 {
		return d
	}
	return time.Minute
}

// pipeline runs the stages from running to stopped.
func (n *Node) pipeline(ctx context.Context, parts *Parts, b *builder.Builder) Ledger {
	workers := 1
	for _, s := range n.cfg.OnlineStages() {
		workers += s.Instances * plugins.CallsInFlight // each instance's calls in flight
	}
	n.direct.Store(storeDirect(parts.Store))
	n.log.Info("store writes", "dir", n.cfg.Store.Dir, "o_direct", n.direct.Load())
	decided := make(chan batch, 1)
	acks := make(chan pendingAck, 64)
	var fwd, dec, sto sync.WaitGroup
	fwd.Go(func() { n.forward(ctx, b.Batches()) })
	for range workers {
		dec.Go(func() { n.decide(ctx, decided) })
	}
	sto.Go(func() { n.store(ctx, decided, acks) })
	sto.Go(func() { n.waitAcks(ctx, acks) })

	_ = n.rc.advance(StateRunning)
	n.mu.Lock()
	n.running = time.Now()
	n.mu.Unlock()
	inCtx, stopInputs := context.WithCancel(ctx)
	defer stopInputs()
	emuCtx, stopEmulators := context.WithCancel(ctx)
	defer stopEmulators()
	var sink transport.Sink = b
	var farmDone <-chan struct{}
	var farmWait func()
	if n.farm != nil {
		if n.cfg.Farm.Roles != "bu" {
			// An RU's agent is never replaced (only a BU-only node rejoins
			// after being fenced).
			sink = n.farm.agent.Load()
		}
		farmDone, farmWait = n.farm.run(ctx)
		defer farmWait()
	}
	in := n.startInputs(inCtx, emuCtx, parts, sink)
	n.mu.Lock()
	n.inputs = in
	n.mu.Unlock()
	stopSampling, sampled := make(chan struct{}), make(chan struct{})
	go n.sampleMemory(stopSampling, sampled)
	stopWatching, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		n.watch.run(stopWatching, n.watchSample)
	}()
	var replay *interFill
	var planner *fillPlanner
	stopPlanning := make(chan struct{})
	// Whether there are replay stages is the parts' to say (OpenParts
	// gives a replay chain only with some: config.ReplaysInRun).
	if (n.cfg.Replay.InterFill > 0 || n.cfg.Fill.Enabled()) && parts.ReplayStore != nil && parts.NewReplayChain != nil {
		replay = newInterFill(n, parts)
		if n.cfg.Fill.Enabled() && parts.Chain != nil {
			p, err := newFillPlanner(n, parts, replay)
			if err != nil {
				n.fail(err)
			} else {
				planner = p
				// The chain ready before the first inter-fill begins.
				replay.early = true
				go planner.run(ctx, stopPlanning)
			}
		}
		n.mu.Lock()
		n.replay, n.fill = replay, planner
		n.mu.Unlock()
		go replay.watch(ctx, in.allIdle)
	}

	finished := in.finished
wait:
	for {
		select {
		case <-n.rc.draining():
			break wait
		case <-finished:
			if n.farm == nil {
				n.log.Info("every input ended; draining")
				break wait
			}
			// In a farm the readout's end is not the run's: other RUs
			// may still send, and this node's RU holds data until the
			// BUs release it. The farm's stop ends the run.
			n.log.Info("every input ended; the farm run goes on until it is stopped (sluice farm stop)")
			n.farm.endOfData(ctx)
			finished = nil
		case <-farmDone:
			if n.farm.drained.Load() {
				n.log.Info("farm: this node was drained out of the run (sluice farm drain) and holds nothing of it; the run goes on without it; draining")
			} else {
				n.log.Info("farm run stopped and nothing of it in flight here; draining")
			}
			break wait
		case <-ctx.Done():
			n.log.Warn("run aborted")
			break wait
		}
	}
	n.Stop()
	_ = n.rc.advance(StateDraining)
	close(stopWatching)
	<-watched
	// A store refusing writes is waited for this long, then what is held
	// is counted not stored (put).
	expire := time.AfterFunc(n.drainTimeout(), func() { close(n.drainExpired) })
	defer expire.Stop()
	close(stopPlanning)
	if planner != nil {
		<-planner.done
	}
	if replay != nil {
		replay.stop()
	}
	// The emulators (standing in for the boards) stop first; the inputs
	// then take what is still in flight until they are idle.
	stopEmulators()
	in.emulators.Wait()
	in.settle(ctx)
	stopInputs()
	in.inputs.Wait()

	closeCtx, cancel := context.WithTimeout(ctx, n.cfg.Builder.Timeout+30*time.Second+n.drainTimeout())
	if err := b.Close(closeCtx); err != nil {
		n.fail(fmt.Errorf("builder close: %w", err))
	}
	cancel()
	fwd.Wait()
	dec.Wait()
	close(decided)
	sto.Wait()
	close(stopSampling)
	<-sampled
	if parts.Chain != nil {
		parts.Chain.Close()
	}
	if parts.Flight != nil {
		if err := parts.Flight.Close(); err != nil {
			n.fail(fmt.Errorf("flight close: %w", err))
		}
	}
	// A run that failed before its first event did not start: nothing of
	// it is anywhere, and its ledger says so instead of an all-zero
	// account that balances.
	notStarted := ""
	if pre := n.snapshot(); pre.empty() {
		if err := n.failure(); err != nil {
			notStarted = strings.ReplaceAll(err.Error(), "\n", "; ")
		}
	}
	// A run drained to its end is recorded as ended on the store, so that
	// starting it again is refused as a rerun; an aborted run is not (a
	// restart resumes it), nor one that did not start.
	if e, ok := parts.Store.(interface{ EndRun(uint32, time.Time) error }); ok && ctx.Err() == nil && notStarted == "" {
		if err := e.EndRun(n.cfg.Run, time.Now()); err != nil {
			n.fail(fmt.Errorf("store: recording the end of run %d: %w", n.cfg.Run, err))
		}
	}
	if err := parts.Store.Close(); err != nil {
		n.fail(fmt.Errorf("store close: %w", err))
	}
	if parts.Close != nil {
		parts.Close()
	}
	n.mu.Lock()
	n.ended = time.Now()
	n.mu.Unlock()
	_ = n.rc.advance(StateStopped)
	l := n.snapshot()
	l.Check(true)
	if notStarted != "" {
		l.NotStarted, l.Balanced, l.Imbalance = notStarted, false, nil
	}
	n.mu.Lock()
	n.final = &l
	n.mu.Unlock()
	return l
}

// failedStart ends a run that failed before its inputs opened: what was
// opened is closed, and the ledger says the run did not start (nothing was
// received; an all-zero "balanced" account would read as a run).
func (n *Node) failedStart(parts *Parts, err error) (Ledger, error) {
	if parts != nil {
		closeParts(parts)
	}
	_ = n.rc.advance(StateStopped)
	l := Ledger{Node: n.cfg.Node.ID, Run: n.cfg.Run, NotStarted: err.Error()}
	n.mu.Lock()
	n.final = &l
	n.mu.Unlock()
	n.log.Error("run did not start", "err", err)
	return l, err
}

// failure is the errors recorded so far (nil: none).
func (n *Node) failure() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return errors.Join(n.errs...)
}

// result is the run's error: the errors recorded, and an unbalanced ledger
// (a run that did not start has no balance to keep).
func (n *Node) result(l *Ledger) error {
	n.mu.Lock()
	errs := append([]error(nil), n.errs...)
	n.mu.Unlock()
	if !l.Balanced && l.NotStarted == "" {
		errs = append(errs, fmt.Errorf("%w: %v", ErrUnbalanced, l.Imbalance))
	}
	return errors.Join(errs...)
}

// reusedRunWarning says that the store already holds events of run, and
// why the node goes on: told to take the run again (rerun), or resuming a
// run that never ended (one that ended is refused without rerun).
func reusedRunWarning(run uint32, events uint64, store string, rerun bool) string {
	why := "resuming a run that did not end (a restart after a kill or a crash); a new run wants a new run number (--run N) or another store"
	if rerun {
		why = "taking the run again (--rerun)"
	}
	return fmt.Sprintf("run %d already has %d stored events in store %s; events with the same ids will replace them: %s",
		run, events, store, why)
}

// ErrUnbalanced: the end-of-run ledger does not add up.
var ErrUnbalanced = errors.New("ledger does not balance")

// ErrRerun: the run number already ended on the store and the node was not
// told to take it again (config.Config.Rerun); nothing was started.
var ErrRerun = errors.New("run already taken on this store")

func closeParts(p *Parts) {
	if p.Chain != nil {
		p.Chain.Close()
	}
	if p.Flight != nil {
		_ = p.Flight.Close()
	}
	if p.Store != nil {
		_ = p.Store.Close()
	}
	if p.Close != nil {
		p.Close()
	}
}

// snapshot assembles the live ledger from the builder, the inputs and the
// flow counters.
func (n *Node) snapshot() Ledger {
	n.mu.Lock()
	b, in, parts, started, running, ended, fn := n.builder, n.inputs, n.parts, n.started, n.running, n.ended, n.farm
	n.mu.Unlock()
	l := Ledger{Node: n.cfg.Node.ID, Run: n.cfg.Run, FragmentsDiscarded: map[string]uint64{}, InputLosses: map[string]uint64{}}
	if in != nil {
		now := time.Now()
		for i, t := range in.trackers {
			l.InputBytes += t.status(now).Bytes
			uri := n.cfg.Inputs[i].URI
			for reason, v := range t.losses() {
				l.InputLosses[uri+"/"+reason] += v
			}
			for reason, v := range t.in.Stats().Flagged {
				if v != 0 {
					if l.FragmentsFlagged == nil {
						l.FragmentsFlagged = map[string]uint64{}
					}
					l.FragmentsFlagged[uri+"/"+reason] += v
				}
			}
		}
	}
	n.flow.fill(&l)
	l.Stages = []StageLedger{}
	if parts != nil && parts.Chain != nil {
		l.Stages = stageLedgers(parts.Chain.State())
	}
	if parts != nil && parts.EmulatorSummaries != nil {
		l.Emulators = parts.EmulatorSummaries()
	}
	if parts != nil {
		l.Memory = n.memoryStatus(parts)
	}
	if fn != nil {
		l.Farm = fn.ledger()
	}
	var first time.Time // the data flow's start
	if b != nil {
		bl := b.Ledger()
		first = bl.FirstFragmentAt
		l.FragmentsReceived, l.BytesReceived = bl.FragmentsIn, bl.BytesIn
		l.FragmentsInEvents, l.FragmentsOpen = bl.FragmentsInEvents, bl.FragmentsOpen+bl.FragmentsWaiting
		l.FragmentsDiscarded = maps.Clone(bl.Discarded)
		l.FragmentsSuspect, l.Resyncs, l.EventsWaitedBehind = bl.SuspectBySource, bl.Resyncs, bl.EventsWaitedBehind
		l.CounterResets, l.FragmentsLate, l.BatchesRelieved = bl.ResetsBySource, bl.LateBySource, bl.BatchesRelieved
		l.EventsBuilt, l.EventsComplete = bl.EventsBuilt, bl.EventsComplete
		l.EventsIncomplete, l.EventsCorrupt, l.EventsSourceError = bl.EventsIncomplete, bl.EventsCorrupt, bl.EventsSourceError
	}
	// The builder counts a batch when it delivers it, before the queue
	// takes it: everything not decided yet is in flight.
	if d := l.EventsAccepted + l.EventsRejected + l.EventsDeferred; l.EventsBuilt > d {
		l.EventsInFlight = l.EventsBuilt - d
	}
	if !started.IsZero() {
		end := ended
		if end.IsZero() {
			end = time.Now()
		}
		l.DurationSeconds = end.Sub(started).Seconds()
		if !running.IsZero() {
			l.StartupSeconds = running.Sub(started).Seconds()
		}
		if done := n.flow.lastFinished(); !first.IsZero() && done.After(first) {
			l.FlowSeconds = done.Sub(first).Seconds()
		}
	}
	return l
}

// Status is the node's current status (GET /status).
func (n *Node) Status() Status {
	n.mu.Lock()
	final, parts, in, replay, started, fn, running, planner := n.final, n.parts, n.inputs, n.replay, n.started, n.farm, n.running, n.fill
	n.mu.Unlock()
	var l Ledger
	if final != nil {
		l = *final
	} else {
		l = n.snapshot()
		l.Check(false)
	}
	s := Status{
		Node: n.cfg.Node.ID, State: n.rc.State(), Run: n.cfg.Run, Ledger: l,
		Rates: n.rates.update(time.Now(), running, &l),
		Buffers: Buffers{
			QueueBatches: len(n.queue), QueueCapacity: cap(n.queue), QueueBytes: n.gate.held(),
			MemoryBudgetBytes: uint64(n.cfg.Node.MemoryBudget),
		},
		Store: StoreStatus{Path: n.cfg.Store.Dir},
	}
	if !started.IsZero() {
		s.UptimeSeconds = time.Since(started).Seconds()
	}
	if n.opts.Limiter != nil {
		s.LogSuppressed = n.opts.Limiter.Suppressed()
	}
	if in != nil {
		now := time.Now()
		for i, t := range in.trackers {
			st := t.status(now)
			st.URI = n.cfg.Inputs[i].URI
			s.Inputs = append(s.Inputs, st)
		}
	}
	if parts != nil {
		if parts.Chain != nil {
			s.Plugins = pluginStatus(parts.Chain.State())
		}
		if k := parts.RunEventsAtStart; k > 0 {
			s.Store.RunEventsAtStart, s.Store.Warning = k, reusedRunWarning(n.cfg.Run, k, n.cfg.Store.Dir, n.cfg.Rerun)
		}
		if parts.Store != nil {
			s.Store.HeadroomBytes = parts.Store.Headroom()
			select {
			case <-parts.Store.Writable():
				s.Store.Writable = true
			default:
			}
		}
	}
	if replay != nil {
		s.Replay = replay.status()
	}
	if planner != nil {
		s.Fill = planner.statusOf()
	}
	if w := n.watchOf(); w != nil {
		s.Warnings = w.status()
	}
	s.Latency = n.lat.status()
	if fn != nil {
		s.Farm = fn.status()
	}
	if parts != nil {
		s.Store.DeferredBacklog = parts.DeferredAtStart + l.EventsStoredDeferred - (s.Replay.Events - s.Replay.Kept)
	}
	return s
}

// watchOf is the run's watcher (nil before Run set it).
func (n *Node) watchOf() *watcher {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.watch
}

// watchSample is what the watcher reads at each interval: the ledger now,
// and each input's time spent waiting for the builder, with its name.
func (n *Node) watchSample() (*Ledger, []uint64, []string) {
	l := n.snapshot()
	n.mu.Lock()
	in := n.inputs
	n.mu.Unlock()
	var wait []uint64
	var uris []string
	if in != nil {
		for i, t := range in.trackers {
			wait = append(wait, t.in.Stats().SinkWaitNs)
			uris = append(uris, n.cfg.Inputs[i].URI)
		}
	}
	return &l, wait, uris
}
