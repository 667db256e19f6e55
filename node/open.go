package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-daq/sluice/node/config"
	"github.com/sluice-daq/sluice/node/emulator"
	"github.com/sluice-daq/sluice/node/transport"
	_ "github.com/sluice-daq/sluice/node/transport/all" // every transport, for the inputs
	"github.com/sluice-daq/sluice/plugins"
	"github.com/sluice-daq/sluice/storage"
	"github.com/sluice-daq/sluice/storage/storeflight"
)

// OpenParts opens what cfg describes, in the order that lets a failure
// leave nothing behind: the store, the online trigger chain (plugin
// processes started and configured), then the inputs (sockets listening,
// rings attached in Run) and their embedded emulators.
func OpenParts(ctx context.Context, cfg *config.Config, reg prometheus.Registerer, log *slog.Logger) (*Parts, error) {
	st, err := OpenStore(cfg, reg)
	if err != nil {
		return nil, err
	}
	p := &Parts{Store: st}
	fail := func(err error) (*Parts, error) {
		closeParts(p)
		return nil, err
	}
	if err := logRecovery(st, log); err != nil {
		return fail(err)
	}
	if cfg.Flight.Enabled() {
		// Served from the start: `sluice store` reads a running node's
		// store through it (badger's lock keeps others out).
		srv, err := storeflight.Serve(st, cfg.Flight, log)
		if err != nil {
			return fail(err)
		}
		p.Flight = srv
	}
	if p.DeferredAtStart, err = countDeferred(st, storage.Selection{}); err != nil {
		return fail(err)
	}
	if p.RunEventsAtStart, err = countRun(st, cfg.Run); err != nil {
		return fail(err)
	}
	if err := refuseRerun(st, cfg, p.RunEventsAtStart); err != nil {
		return fail(err)
	}
	replay := cfg.ReplaysInRun()
	var arena *plugins.Arena
	if stages := cfg.OnlineStages(); len(stages) > 0 || replay {
		// What a node killed with SIGKILL left in /dev/shm first: the
		// arena needs its space.
		for _, r := range plugins.RemoveStaleRegions() {
			log.Warn(plugins.ReclaimedRegion, "pid", r.PID, "path", r.Path, "bytes", r.Bytes)
		}
		// The builder builds its batches in this shared memory, which every
		// plugin maps once: batches reach the plugins without a copy. It
		// holds the budget's batches share (when full, batches fall back
		// to the heap and are copied to the plugins).
		if arena, err = plugins.NewArena(int(cfg.Memory().Batches)); err != nil {
			return fail(fmt.Errorf("plugin arena: %w", err))
		}
		p.BatchAllocator, p.Arena = arena.Unzeroed(), arena
		p.Close = func() { _ = arena.Close() }
		if len(stages) > 0 {
			c, err := NewChain(ctx, stages, reg, log, arena, st)
			if err != nil {
				return fail(err)
			}
			p.Chain = c
		}
	}
	if replay {
		p.ReplayStore = st
		p.NewReplayChain = func(ctx context.Context) (Decider, error) {
			return newReplayChain(ctx, cfg, log.With("replay", true), arena)
		}
	}
	groups, err := cfg.Groups()
	if err != nil {
		return fail(err)
	}
	summaries := &emulatorSummaries{}
	for i, ic := range cfg.Inputs {
		// Validate parsed every URI: an error here is a configuration made
		// in code that skipped it.
		u, err := transport.ParseURI(ic.URI)
		if err != nil {
			return fail(fmt.Errorf("inputs[%d]: %w", i, err))
		}
		t := transport.Lookup(u.Scheme)
		if ic.Emulator != nil && t.ClearStale != nil {
			removed, err := t.ClearStale(u)
			for _, r := range removed {
				attrs := []any{"input", ic.URI, "what", r.What, "pid", r.PID, "path", r.Path, "bytes", r.Bytes}
				if r.OtherPID != 0 {
					attrs = append(attrs, "other_pid", r.OtherPID)
				}
				log.Warn("reclaimed a stale shared-memory file a dead process left", attrs...)
			}
			if err != nil {
				return fail(fmt.Errorf("inputs[%d] %s: %w", i, ic.URI, err))
			}
		}
		in, err := transport.OpenInput(ic.URI, ic.Options)
		if err != nil {
			return fail(fmt.Errorf("inputs[%d] %s: %w", i, ic.URI, err))
		}
		if lg, ok := in.(transport.Logged); ok {
			lg.SetLogger(log)
		}
		if pl, ok := in.(transport.PacketLimited); ok {
			pl.LimitPacket(int64(cfg.Memory().Builder))
		}
		p.Inputs = append(p.Inputs, in)
		if l, ok := in.(transport.Listener); ok {
			log.Info("input listening", "input", ic.URI, "addr", l.ListenAddr())
		}
		prev := p.Close
		p.Close = func() {
			_ = in.Close()
			if prev != nil {
				prev()
			}
		}
		opts := ic.Options
		if opts == nil {
			opts = t.NewInputOptions()
		}
		finite := opts.Ends()
		var emu func(context.Context) error
		if e := ic.Emulator; e != nil {
			// The section is the emulator's own Config; the input gives it
			// its URI and the node its source groups.
			ec := e.Config
			ec.To, ec.Groups = ic.URI, groups
			if ec.From != "" {
				uri, from := ic.URI, ec.From
				ec.OnSources = func(has []uint32) {
					if f := p.emulatorFile; f != nil {
						f(uri, from, has)
					}
				}
			}
			finite = finite || e.From != "" || e.Events > 0 || e.Duration > 0
			// Prepared now, while the node starts: reading and splitting
			// the file is the emulator's set-up, not part of the run, and a
			// file it cannot replay is a run that does not start.
			prep, err := emulator.Prepare(ec)
			if err != nil {
				return fail(fmt.Errorf("inputs[%d] %s: emulator: %w", i, ic.URI, err))
			}
			emu = func(ctx context.Context) error {
				s, err := prep.Run(ctx)
				summaries.add(s)
				log.Info("emulator sent", "input", ic.URI, "packets", s.PacketsSent, "fragments", s.FragmentsSent,
					"bytes", s.BytesSent, "bytes_placed", s.BytesPlaced, "throttled_ms", s.ThrottledNs/1e6, "faults", s.Faults)
				if errors.Is(err, context.Canceled) {
					return nil
				}
				return err
			}
		}
		p.Finite = append(p.Finite, finite)
		p.Emulators = append(p.Emulators, emu)
	}
	p.EmulatorSummaries = summaries.get
	return p, nil
}

// emulatorSummaries collects what the embedded emulators sent.
type emulatorSummaries struct {
	mu   sync.Mutex
	sums []emulator.Summary
}

func (e *emulatorSummaries) add(s emulator.Summary) {
	e.mu.Lock()
	e.sums = append(e.sums, s)
	e.mu.Unlock()
}

func (e *emulatorSummaries) get() []emulator.Summary {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]emulator.Summary(nil), e.sums...)
}

// OpenStore opens the event store with cfg's policy and its share of the
// memory budget; its metrics go to reg.
func OpenStore(cfg *config.Config, reg prometheus.Registerer) (*storage.Store, error) {
	o := cfg.Store.WithMemory(int64(cfg.Memory().Store))
	o.Registerer = reg
	return storage.Open(o)
}

// logRecovery says what opening the store recovered after a writer that
// did not close it: what it removed and cut, and the events it kept.
func logRecovery(st *storage.Store, log *slog.Logger) error {
	rec := st.Recovery()
	if !rec.Dirty && rec.EmptyLogsRemoved == 0 {
		return nil
	}
	stats, err := st.Stats()
	if err != nil {
		return err
	}
	attrs := []any{"previous_pid", rec.PreviousPID, "empty_logs_removed", rec.EmptyLogsRemoved, "log_bytes_cut", rec.LogBytesCut, "segment_entries_dropped", rec.SegmentEntriesDropped}
	for _, ss := range stats.Streams {
		attrs = append(attrs, "events_kept_"+ss.Stream.String(), ss.Events)
	}
	log.Warn("store recovered after its previous writer did not close it (killed?): logs replayed and cut at their last whole entry", attrs...)
	return nil
}

// countRun counts the events of run already in st, in both streams: a run
// number reused on the same store replaces those with the same event ids.
func countRun(st *storage.Store, run uint32) (uint64, error) {
	// Stats reads keys only: the events themselves are listed only when the
	// run is there at all.
	stats, err := st.Stats()
	if err != nil {
		return 0, err
	}
	if !slices.ContainsFunc(stats.Streams, func(ss storage.StreamStats) bool { return slices.Contains(ss.Runs, run) }) {
		return 0, nil
	}
	var n uint64
	sel := storage.Selection{MinRun: run, MaxRun: run}
	for _, stream := range []storage.Stream{storage.Accepted, storage.Deferred} {
		// MaxRun 0 means "no upper bound", so the run is checked per event.
		err := st.List(stream, sel, 0, func(e storage.EventInfo) bool {
			if e.Key.Run == run {
				n++
			}
			return e.Key.Run <= run
		})
		if err != nil {
			return 0, err
		}
	}
	return n, nil
}

// refuseRerun refuses a run number that already ended normally on the
// store (storage.Store.EndRun) unless cfg.Rerun: a rerun would silently
// replace the stored events with the same ids. A run that never ended here
// (killed, crashed) is resumed, and a farm node takes the farm's run
// (rejoining a run still going on), so neither is refused.
func refuseRerun(st *storage.Store, cfg *config.Config, stored uint64) error {
	if cfg.Rerun || cfg.Farm.Enabled() {
		return nil
	}
	at, ended, err := st.RunEnded(cfg.Run)
	if err != nil || !ended {
		return err
	}
	return fmt.Errorf("%w: run %d ended on store %s at %s with %d events stored; taking it again would replace them: give a new run number (--run N), another store (--store DIR), or --rerun to replace them",
		ErrRerun, cfg.Run, cfg.Store.Dir, at.UTC().Format(time.RFC3339), stored)
}
