package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/dustin/go-humanize"

	"github.com/sluice-daq/sluice/node/farm"
	"github.com/sluice-daq/sluice/plugins"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/storage"
)

// byteGate bounds the payload bytes of the event batches between the
// builder and the store (queued, being decided, being stored). A batch is
// always admitted when nothing is held, so one batch larger than the bound
// cannot block forever.
type byteGate struct {
	mu    sync.Mutex
	cond  *sync.Cond
	used  int64
	peak  int64 // highest used
	limit int64
}

func newByteGate(limit int64) *byteGate {
	g := &byteGate{limit: limit}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *byteGate) acquire(ctx context.Context, n int64) error {
	stop := context.AfterFunc(ctx, func() {
		g.mu.Lock()
		g.cond.Broadcast()
		g.mu.Unlock()
	})
	defer stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.used > 0 && g.used+n > g.limit {
		if err := ctx.Err(); err != nil {
			return err
		}
		g.cond.Wait()
	}
	g.used += n
	g.peak = max(g.peak, g.used)
	return nil
}

func (g *byteGate) release(n int64) {
	g.mu.Lock()
	g.used -= n
	g.cond.Broadcast()
	g.mu.Unlock()
}

func (g *byteGate) held() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.used
}

// peakHeld is the most the gate ever held, in bytes.
func (g *byteGate) peakHeld() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.peak
}

// batch is one event batch on its way from the builder to the store.
type batch struct {
	rec      arrow.RecordBatch
	ev       *schemas.EventBatch // the one view of rec, for the chain and the store; releases rec once decided
	size     int64               // bytes held in the byteGate
	emitted  time.Time           // when the builder handed it on (and it entered the queue)
	verdicts []schemas.Verdict
	writes   []write // what to store, prepared by the decide worker
	seq      uint64  // its place in the queue's order, 0, 1, 2, …
}

// write is the part of a decided batch that goes to one store stream.
type write struct {
	stream storage.Stream
	rows   []int // the batch's rows for this stream
}

// forward moves batches from the builder into the bounded queue until the
// builder closes its channel. After a hard abort it keeps receiving (so the
// builder can finish) and releases what it gets; those events stay "in
// flight" and the final ledger says so.
func (n *Node) forward(ctx context.Context, from <-chan arrow.RecordBatch) {
	defer close(n.queue)
	var seq uint64 // the next queued batch's place in the order (plugins.WithBatchOrder)
	for rec := range from {
		size := recordBytes(rec)
		if n.gate.acquire(ctx, size) != nil {
			rec.Release()
			continue
		}
		select {
		case n.queue <- batch{rec: rec, size: size, emitted: time.Now(), seq: seq}:
			seq++
		case <-ctx.Done():
			n.gate.release(size)
			rec.Release()
		}
	}
}

// recordBytes is the size of rec's buffers (payloads dominate it).
func recordBytes(rec arrow.RecordBatch) int64 {
	var n int64
	var add func(d arrow.ArrayData)
	add = func(d arrow.ArrayData) {
		for _, b := range d.Buffers() {
			if b != nil {
				n += int64(b.Len())
			}
		}
		for _, c := range d.Children() {
			add(c)
		}
	}
	for _, c := range rec.Columns() {
		add(c.Data())
	}
	return n
}

// decide runs the online chain on queued batches; several run at once so
// that every plugin instance has work. A batch the chain fails on (other
// than by the run being aborted) is deferred whole with StatusTriggerError
// and the reason, so replay can decide it later, and the run fails.
func (n *Node) decide(ctx context.Context, out chan<- batch) {
	for b := range n.queue {
		n.lat.queue.Observe(time.Since(b.emitted).Seconds())
		ev, err := schemas.NewEventBatch(b.rec)
		if err != nil {
			// Not an event batch (the builder's always are): its events
			// stay in flight, and the ledger does not balance.
			n.fail(fmt.Errorf("event batch: %w", err))
			n.gate.release(b.size)
			b.rec.Release()
			if c, ok := n.parts.Chain.(interface{ SkipBatch(seq uint64) }); ok {
				c.SkipBatch(b.seq) // the batches after it still get their turn
			}
			continue
		}
		b.ev = ev
		n.watch.observe(ev)
		sinceArrival(n.lat.build, ev, nil, b.emitted)
		if n.parts.Chain == nil {
			b.verdicts = deferAll(ev, reasonNoOnlineStage, 0)
			n.prepare(&b)
			if n.farm != nil {
				n.farm.decided(b.ev)
			}
			out <- b
			continue
		}
		t0 := time.Now()
		// In the batches' order for the stages' counter prescales, though
		// the workers decide them in parallel.
		v, err := n.parts.Chain.Decide(plugins.WithBatchOrder(ctx, b.seq), ev)
		n.lat.chain.Observe(time.Since(t0).Seconds())
		if err == nil && len(v) != ev.Len() {
			err = fmt.Errorf("trigger chain returned %d decisions for %d events", len(v), ev.Len())
		}
		switch {
		case err == nil:
			b.verdicts = v
		case ctx.Err() != nil:
			// Aborted: the batch is dropped and its events stay in flight
			// in the ledger, which then does not balance.
			n.gate.release(b.size)
			b.ev.Release()
			continue
		default:
			n.fail(fmt.Errorf("trigger chain: %w", err))
			reason := schemas.Reason{Kind: schemas.ReasonTriggerError, Text: "trigger-error: the trigger chain failed: " + err.Error()}
			b.verdicts = deferAll(ev, reason, schemas.StatusTriggerError)
		}
		n.prepare(&b)
		if n.farm != nil {
			n.farm.decided(b.ev)
		}
		out <- b
	}
}

// reasonNoOnlineStage is the deferral of every event when the config has
// no online trigger stage: every event waits for replay.
var reasonNoOnlineStage = schemas.Reason{Kind: schemas.ReasonNoOnlineStage, Text: "no-online-stage"}

// deferAll defers every event of ev with reason, adding status bits.
func deferAll(ev *schemas.EventBatch, reason schemas.Reason, add schemas.EventStatus) []schemas.Verdict {
	v := make([]schemas.Verdict, ev.Len())
	for i := range v {
		v[i] = schemas.Verdict{Decision: schemas.DecisionDefer, Reason: reason, Status: add}
	}
	return v
}

// Reasons for events kept by the chain that did not reach the store.
const (
	reasonStoreError = "store_error" // the store refused the write (not for the disk budget, which waits)
	reasonNotDurable = "not_durable" // written, but the store never reported it durable
	// reasonNotStoredAtDrain: still held when node.drain_timeout passed in a
	// drain with the store refusing writes (disk budget); ids in the ledger.
	reasonNotStoredAtDrain = "not_stored_at_drain"
	// reasonTooLargeForStore: an event larger than the store's value limit
	// (storage.Store.MaxEventBytes); the run goes on without it.
	reasonTooLargeForStore = "too_large_for_store"
	// reasonEventTooLarge: an event larger than builder.max_event_bytes,
	// which validation keeps within the store's limit; the run goes on.
	reasonEventTooLarge = "event_too_large"
)

// errNotStoredAtDrain: put gave up on a store refusing writes because the
// drain timeout passed.
var errNotStoredAtDrain = errors.New("the store refused writes until the drain timeout passed")

// pendingAck is a store write not yet durable under the sync policy.
type pendingAck struct {
	seq      uint64
	stream   storage.Stream
	events   int
	replaced int
	bytes    int64
	// put is when the write was handed to the store; arrivals its
	// events' first-fragment arrivals (Unix ns; none in timeslice mode),
	// copied since the batch is released before the write is durable.
	put      time.Time
	arrivals []uint64
	// farmIDs (a farm BU under the durable release policy): the event ids
	// of a batch whose writes end at seq, told to the farm once durable
	// (a marker: no events of its own).
	farmIDs []uint64
}

// prepare counts a decided batch's decisions and splits its rows between
// the accepted stream and the deferred stream (rejected rows are only
// counted). It runs in the decide workers, in parallel, so that the store
// goroutine only writes.
func (n *Node) prepare(b *batch) {
	var acc, def, rej []int
	f := n.flow
	f.mu.Lock()
	for i := range b.verdicts {
		v := &b.verdicts[i]
		*v = v.Decided()
		switch v.Decision {
		case schemas.DecisionAccept:
			acc = append(acc, i)
			f.accepted++
			for _, name := range schemas.FiredLines(v.Lines, f.names[v.Stage]) {
				f.lines[v.Stage+"/"+name]++
			}
		case schemas.DecisionReject:
			f.rejected++
			rej = append(rej, i)
		default:
			def = append(def, i)
			f.deferred++
			f.deferredBy[v.ReasonName()]++
		}
	}
	f.unacked += uint64(len(acc) + len(def))
	f.mu.Unlock()
	if len(rej) > 0 {
		sinceArrival(n.lat.endToEnd.WithLabelValues("rejected"), b.ev, rej, time.Now())
	}
	for _, w := range []write{{storage.Accepted, acc}, {storage.Deferred, def}} {
		if lim := int64(n.cfg.Builder.MaxEventBytes); lim > 0 {
			w.rows = n.dropTooLarge(b, w, lim)
		}
		if len(w.rows) > 0 {
			b.writes = append(b.writes, w)
		}
	}
}

// dropTooLarge returns w's rows whose events are at most limit payload
// bytes, and counts and logs the others (builder.max_event_bytes).
func (n *Node) dropTooLarge(b *batch, w write, limit int64) []int {
	var ids []uint64
	var sizes []int64
	kept := w.rows[:0:0]
	for _, r := range w.rows {
		var size int64
		for g := range b.ev.Groups {
			size += int64(len(b.ev.GroupPayload(g, r)))
		}
		if size > limit {
			ids, sizes = append(ids, b.ev.EventID(r)), append(sizes, size)
			continue
		}
		kept = append(kept, r)
	}
	if ids == nil {
		return w.rows
	}
	n.dropKept(len(ids), reasonEventTooLarge)
	n.log.Error("events larger than builder.max_event_bytes: not stored", "reason", reasonEventTooLarge, "stream", w.stream.String(),
		"event_ids", ids, "payload_bytes", sizes, "max_event_bytes", limit)
	return kept
}

// store writes the prepared parts of each decided batch, in order.
func (n *Node) store(ctx context.Context, in <-chan batch, acks chan<- pendingAck) {
	defer close(acks)
	durable := n.farm != nil && n.farm.policy == farm.OutcomeDurable
	for b := range in {
		var last uint64 // the batch's last write not yet durable
		for _, w := range b.writes {
			seq, err := n.put(ctx, &b, w, acks)
			if errors.Is(err, errNotStoredAtDrain) {
				n.notStoredAtDrain(&b, w)
			} else if err != nil {
				n.dropKept(len(w.rows), reasonStoreError)
				n.fail(fmt.Errorf("store %s stream: %w", w.stream, err))
			}
			last = max(last, seq)
		}
		if durable {
			ids := make([]uint64, b.ev.Len())
			for i := range ids {
				ids[i] = b.ev.EventID(i)
			}
			if last == 0 {
				n.farm.durable(ids)
			} else {
				acks <- pendingAck{seq: last, farmIDs: ids}
			}
		}
		n.gate.release(b.size)
		// Through the view: a shadow plugin still reading the batch is
		// cut off first (its result for it is discarded), never waited for.
		b.ev.Release()
		n.flow.finished(time.Now())
	}
}

// put writes w. While the disk budget refuses writes it waits for the
// store to become writable again: the pipeline stalls and the readout is
// throttled, nothing is dropped. It returns the write's sequence number
// when it is not durable yet (0 when it is).
func (n *Node) put(ctx context.Context, b *batch, w write, acks chan<- pendingAck) (uint64, error) {
	stream := w.stream
	for {
		start := time.Now()
		ack, err := n.parts.Store.Put(stream, b.ev, b.verdicts, w.rows)
		if err == nil && len(ack.TooLarge) > 0 {
			n.tooLargeForStore(b, stream, ack.TooLarge)
		}
		if n.direct.Load() && !storeDirect(n.parts.Store) {
			n.direct.Store(false)
			n.log.Warn("store: the file system refused O_DIRECT; segment files are written through the page cache from now on (more CPU per stored byte)", "dir", n.cfg.Store.Dir)
		}
		if err == nil {
			if ack.Replaced > 0 {
				// The running total too: the warning is rate limited, and
				// the last one logged should say how many there were by
				// then (all of them: the ledger's events_replaced).
				n.replacedSoFar += uint64(ack.Replaced)
				n.log.Warn("stored events replaced events already in the store (same run and event id)",
					"stream", stream.String(), "replaced", ack.Replaced, "replaced_in_run", n.replacedSoFar)
			}
			p := pendingAck{seq: ack.Seq, stream: stream, events: ack.Events, replaced: ack.Replaced, bytes: ack.Bytes, put: start}
			if b.ev.Mode != schemas.ModeTimeslice {
				p.arrivals = make([]uint64, len(w.rows))
				for i, r := range w.rows {
					p.arrivals[i] = b.ev.Timestamp(r)
				}
			}
			if ack.Durable {
				n.acked(p)
				return 0, nil
			}
			acks <- p
			return ack.Seq, nil
		}
		if !errors.Is(err, storage.ErrDiskBudget) {
			return 0, err
		}
		if err := n.holdForStore(ctx, err); err != nil {
			return 0, err
		}
	}
}

// holdForStore waits while the store refuses writes for its disk budget
// (refused, the first refusal): until it is writable again (nil), the
// drain timeout passes (errNotStoredAtDrain) or ctx ends. The hold is
// logged when it begins and again every warnings.interval while it lasts,
// with how long the pipeline has been held: an operator watching the log
// sees a node that stopped storing, not one that went quiet; after the
// drain timeout nothing more is logged (the run's error says it).
func (n *Node) holdForStore(ctx context.Context, refused error) error {
	select {
	case <-n.drainExpired:
		return fmt.Errorf("%w: %w", errNotStoredAtDrain, refused)
	default:
	}
	n.log.Warn("store refuses writes: disk budget reached; holding the pipeline", "err", refused, "what_to_do", n.holdHint(refused))
	start := time.Now()
	remind := time.NewTicker(n.cfg.Warnings.Interval)
	defer remind.Stop()
	for {
		select {
		case <-n.parts.Store.Writable():
			n.log.Info("store writable again: the pipeline goes on", "held_seconds", time.Since(start).Round(100*time.Millisecond).Seconds())
			return nil
		case <-n.drainExpired:
			return fmt.Errorf("%w: %w", errNotStoredAtDrain, refused)
		case <-ctx.Done():
			return refused
		case <-remind.C:
			// headroom_bytes: as the store's guard last measured it (the
			// first refusal's figures are in err).
			n.log.Warn("store still refuses writes: the pipeline is held", "held_seconds", time.Since(start).Round(100*time.Millisecond).Seconds(),
				"headroom_bytes", n.parts.Store.Headroom(), "err", refused, "what_to_do", n.holdHint(refused))
		}
	}
}

// holdHint is what an operator can do about a hold: lift the limit that
// refused (refused's DiskBudgetError says which) and, before a drain,
// what a stop does; during one, when the node gives up.
func (n *Node) holdHint(refused error) string {
	var hint string
	var be *storage.DiskBudgetError
	switch {
	case errors.As(refused, &be) && be.BySizeCap:
		hint = fmt.Sprintf("raise store.max_bytes (the store holds %v of its %v)", humanize.IBytes(be.Size), humanize.IBytes(be.MaxSize))
	case be != nil:
		hint = fmt.Sprintf("free space on the store's file system (%v free) or lower store.min_free_bytes (%v)", humanize.IBytes(be.Free), humanize.IBytes(be.MinFree))
	default:
		hint = "free space on the store's file system, raise store.max_bytes or lower store.min_free_bytes"
	}
	select {
	case <-n.rc.draining():
		return hint + fmt.Sprintf("; the node is draining: node.drain_timeout (%v) after the drain began it counts what it still holds as not_stored_at_drain", n.drainTimeout())
	default:
		return hint + fmt.Sprintf("; a stop (SIGTERM) drains for node.drain_timeout (%v), then counts what is left as not_stored_at_drain", n.drainTimeout())
	}
}

// tooLargeForStore counts the rows of b the store left out as too large,
// and logs their ids and sizes (one record per write).
func (n *Node) tooLargeForStore(b *batch, stream storage.Stream, rows []int) {
	n.dropKept(len(rows), reasonTooLargeForStore)
	ids, sizes := make([]uint64, len(rows)), make([]int, len(rows))
	for k, r := range rows {
		ids[k] = b.ev.EventID(r)
		for g := range b.ev.Groups {
			sizes[k] += len(b.ev.GroupPayload(g, r))
		}
	}
	n.log.Error("events too large for the store: not stored", "reason", reasonTooLargeForStore, "stream", stream.String(),
		"event_ids", ids, "payload_bytes", sizes, "store_limit_bytes", n.parts.Store.MaxEventBytes())
}

// notStoredAtDrain counts w's events as not stored, with their ids, and
// fails the run (once): the drain ended with the store refusing writes.
func (n *Node) notStoredAtDrain(b *batch, w write) {
	f := n.flow
	f.mu.Lock()
	first := f.dropped[reasonNotStoredAtDrain] == 0
	f.dropped[reasonNotStoredAtDrain] += uint64(len(w.rows))
	f.unacked -= uint64(len(w.rows))
	for _, r := range w.rows {
		f.notStored = append(f.notStored, b.ev.EventID(r))
	}
	f.mu.Unlock()
	if first {
		n.fail(fmt.Errorf("drain: the store refused writes (disk budget) for node.drain_timeout %v: the events the node still held are not stored (events_dropped not_stored_at_drain, their ids in the ledger's not_stored_at_drain)", n.drainTimeout()))
	}
}

// waitAcks counts writes as stored once the store reports them durable.
func (n *Node) waitAcks(ctx context.Context, acks <-chan pendingAck) {
	for a := range acks {
		if a.farmIDs != nil {
			if n.parts.Store.WaitDurable(ctx, a.seq) == nil {
				n.farm.durable(a.farmIDs)
			}
			continue
		}
		if err := n.parts.Store.WaitDurable(ctx, a.seq); err != nil {
			n.dropKept(a.events, reasonNotDurable)
			n.fail(fmt.Errorf("store: write %d never became durable: %w", a.seq, err))
			continue
		}
		n.acked(a)
	}
}

// acked counts a durable write as stored.
func (n *Node) acked(a pendingAck) {
	now := time.Now()
	n.lat.ack.Observe(now.Sub(a.put).Seconds())
	stored := n.lat.endToEnd.WithLabelValues("stored")
	for _, t := range a.arrivals {
		if d := now.UnixNano() - int64(t); d >= 0 {
			stored.Observe(float64(d) / 1e9)
		}
	}
	f := n.flow
	f.mu.Lock()
	if a.stream == storage.Accepted {
		f.storedAcc += uint64(a.events)
	} else {
		f.storedDef += uint64(a.events)
		f.storedDefB += uint64(a.bytes)
	}
	f.storedBytes += uint64(a.bytes)
	f.replaced += uint64(a.replaced)
	f.unacked -= uint64(a.events)
	f.finishedLocked(now)
	f.mu.Unlock()
}

func (n *Node) dropKept(events int, reason string) {
	f := n.flow
	f.mu.Lock()
	f.dropped[reason] += uint64(events)
	f.unacked -= uint64(events)
	f.mu.Unlock()
}
