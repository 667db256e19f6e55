package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/compute/exec"
	"github.com/apache/arrow-go/v18/arrow/memory"

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

// batch is one event batch on its way from the builder to the store.
type batch struct {
	rec      arrow.RecordBatch
	size     int64 // bytes held in the byteGate
	verdicts []Verdict
	writes   []write // what to store, prepared by the decide worker
}

// write is the part of a decided batch that goes to one store stream.
type write struct {
	stream storage.Stream
	rec    arrow.RecordBatch // the batch's rows for this stream
	events *schemas.EventBatch
	meta   []storage.RowMeta
}

// forward moves batches from the builder into the bounded queue until the
// builder closes its channel. After a hard abort it keeps receiving (so the
// builder can finish) and releases what it gets; those events stay "in
// flight" and the final ledger says so.
func (n *Node) forward(ctx context.Context, from <-chan arrow.RecordBatch) {
	defer close(n.queue)
	for rec := range from {
		size := recordBytes(rec)
		if n.gate.acquire(ctx, size) != nil {
			rec.Release()
			continue
		}
		select {
		case n.queue <- batch{rec: rec, size: size}:
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
		if n.parts.Chain == nil {
			b.verdicts = deferAll(b.rec, ReasonNoOnlineStage, 0)
			n.prepare(ctx, &b)
			out <- b
			continue
		}
		v, err := n.parts.Chain.Decide(ctx, b.rec)
		if err == nil && len(v) != int(b.rec.NumRows()) {
			err = fmt.Errorf("trigger chain returned %d decisions for %d events", len(v), b.rec.NumRows())
		}
		switch {
		case err == nil:
			b.verdicts = v
		case ctx.Err() != nil:
			// Aborted: the batch is dropped and its events stay in flight
			// in the ledger, which then does not balance.
			n.gate.release(b.size)
			b.rec.Release()
			continue
		default:
			n.fail(fmt.Errorf("trigger chain: %w", err))
			b.verdicts = deferAll(b.rec, "trigger chain failed: "+err.Error(), schemas.StatusTriggerError)
		}
		n.prepare(ctx, &b)
		out <- b
	}
}

// ReasonNoOnlineStage is the deferral reason when the config has no online
// trigger stage: every event waits for replay.
const ReasonNoOnlineStage = "no-online-stage"

// deferAll defers every event of rec with reason, adding status bits.
func deferAll(rec arrow.RecordBatch, reason string, add schemas.EventStatus) []Verdict {
	v := make([]Verdict, rec.NumRows())
	status := rec.Column(rec.Schema().FieldIndices(schemas.ColStatus)[0]).(*array.Uint32)
	for i := range v {
		v[i] = Verdict{Decision: schemas.DecisionDefer, Reason: reason, Status: schemas.EventStatus(status.Value(i)) | add}
	}
	return v
}

// deferKey is the DeferredBy key of a verdict, "stage/why": bounded in
// number (it becomes a metric label), so a free-text reason is cut to its
// first word ("deferred: backlog above 2048 events" -> "backlog").
func deferKey(v *Verdict) string {
	switch {
	case v.Reason == ReasonNoOnlineStage:
		return ReasonNoOnlineStage
	case v.Stage == "" && v.Status&schemas.StatusTriggerError != 0:
		return "trigger-error"
	case v.Status&schemas.StatusTriggerError != 0:
		return v.Stage + "/trigger-error"
	}
	r := strings.ToLower(strings.TrimPrefix(v.Reason, "deferred: "))
	if i := strings.IndexFunc(r, func(c rune) bool { return !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') }); i >= 0 {
		r = r[:i]
	}
	if r == "" {
		r = "plugin"
	}
	return v.Stage + "/" + r[:min(len(r), 32)]
}

// Reasons for events kept by the chain that did not reach the store.
const (
	reasonStoreError = "store_error" // the store refused the write (not for the disk budget, which waits)
	reasonNotDurable = "not_durable" // written, but the store never reported it durable
)

// pendingAck is a store write not yet durable under the sync policy.
type pendingAck struct {
	seq      uint64
	stream   storage.Stream
	events   int
	replaced int
	bytes    int64
}

// prepare counts a decided batch's decisions and prepares its writes:
// the accepted rows for the accepted stream, the deferred ones for the
// deferred stream (rejected rows are only counted). It runs in the decide
// workers, in parallel, so that the store goroutine only writes.
func (n *Node) prepare(ctx context.Context, b *batch) {
	var acc, def []int
	f := n.flow
	f.mu.Lock()
	for i := range b.verdicts {
		v := &b.verdicts[i]
		if n.parts.Chain != nil {
			f.countStages(v, n.parts.Chain)
		}
		switch v.Decision {
		case schemas.DecisionAccept:
			acc = append(acc, i)
			f.accepted++
			if v.Lines != 0 && n.parts.Chain != nil {
				names := n.parts.Chain.Lines(v.Stage)
				for bit := 0; bit < 64; bit++ {
					if v.Lines&(1<<bit) != 0 {
						f.lines[lineName(v.Stage, names, bit)]++
					}
				}
			}
		case schemas.DecisionReject:
			f.rejected++
		default: // defer; an undecided event is deferred too, never lost
			def = append(def, i)
			f.deferred++
			f.deferredBy[deferKey(v)]++
		}
	}
	f.unacked += uint64(len(acc) + len(def))
	f.mu.Unlock()

	rec, err := withStatus(b.rec, b.verdicts, n.mem)
	if err != nil {
		n.dropKept(len(acc)+len(def), reasonStoreError)
		n.fail(err)
		return
	}
	defer rec.Release()
	for _, part := range []struct {
		stream storage.Stream
		rows   []int
	}{{storage.Accepted, acc}, {storage.Deferred, def}} {
		if len(part.rows) == 0 {
			continue
		}
		w, err := n.selectWrite(ctx, rec, b.verdicts, part.stream, part.rows)
		if err != nil {
			n.dropKept(len(part.rows), reasonStoreError)
			n.fail(fmt.Errorf("store %s stream: %w", part.stream, err))
			continue
		}
		b.writes = append(b.writes, w)
	}
}

// selectWrite takes rows of rec, with their trigger metadata, for stream.
func (n *Node) selectWrite(ctx context.Context, rec arrow.RecordBatch, verdicts []Verdict, stream storage.Stream, rows []int) (write, error) {
	sub, err := selectRows(ctx, rec, rows, n.mem)
	if err != nil {
		return write{}, err
	}
	eb, err := schemas.NewEventBatch(sub)
	if err != nil {
		sub.Release()
		return write{}, err
	}
	meta := make([]storage.RowMeta, len(rows))
	for k, i := range rows {
		v := verdicts[i]
		meta[k] = storage.RowMeta{Decision: v.Decision, Lines: v.Lines, Stage: v.Stage, Reason: v.Reason}
		if meta[k].Decision == schemas.DecisionNone {
			meta[k].Decision, meta[k].Reason = schemas.DecisionDefer, "undecided"
		}
	}
	return write{stream: stream, rec: sub, events: eb, meta: meta}, nil
}

// store writes the prepared parts of each decided batch, in order.
func (n *Node) store(ctx context.Context, in <-chan batch, acks chan<- pendingAck) {
	defer close(acks)
	for b := range in {
		for _, w := range b.writes {
			if err := n.put(ctx, w, acks); err != nil {
				n.dropKept(len(w.meta), reasonStoreError)
				n.fail(fmt.Errorf("store %s stream: %w", w.stream, err))
			}
			w.rec.Release()
		}
		n.gate.release(b.size)
		b.rec.Release()
	}
}

func lineName(stage string, names []string, bit int) string {
	return stage + "/" + lineLabel(names, bit)
}

// lineLabel names line bit of a stage whose lines are names ("lineN" when
// the plugin did not name it).
func lineLabel(names []string, bit int) string {
	if bit < len(names) && names[bit] != "" {
		return names[bit]
	}
	return fmt.Sprintf("line%d", bit)
}

// put writes w. While the disk budget refuses writes it waits for the
// store to become writable again: the pipeline stalls and the readout is
// throttled, nothing is dropped.
func (n *Node) put(ctx context.Context, w write, acks chan<- pendingAck) error {
	stream := w.stream
	for {
		ack, err := n.parts.Store.Put(stream, w.events, w.meta)
		if err == nil {
			if ack.Replaced > 0 {
				n.log.Warn("stored events replaced events already in the store (same run and event id)",
					"stream", stream.String(), "replaced", ack.Replaced)
			}
			p := pendingAck{seq: ack.Seq, stream: stream, events: ack.Events, replaced: ack.Replaced, bytes: ack.Bytes}
			if ack.Durable {
				n.acked(p)
			} else {
				acks <- p
			}
			return nil
		}
		if !errors.Is(err, storage.ErrDiskBudget) {
			return err
		}
		n.log.Warn("store refuses writes: disk budget reached; holding the pipeline", "err", err)
		select {
		case <-n.parts.Store.Writable():
		case <-ctx.Done():
			return err
		}
	}
}

// waitAcks counts writes as stored once the store reports them durable.
func (n *Node) waitAcks(ctx context.Context, acks <-chan pendingAck) {
	for a := range acks {
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
	f := n.flow
	f.mu.Lock()
	if a.stream == storage.Accepted {
		f.storedAcc += uint64(a.events)
	} else {
		f.storedDef += uint64(a.events)
	}
	f.storedBytes += uint64(a.bytes)
	f.replaced += uint64(a.replaced)
	f.unacked -= uint64(a.events)
	f.mu.Unlock()
}

func (n *Node) dropKept(events int, reason string) {
	f := n.flow
	f.mu.Lock()
	f.dropped[reason] += uint64(events)
	f.unacked -= uint64(events)
	f.mu.Unlock()
}

// selectRows returns the rows of rec (ascending indices), without copying
// when that is every row.
func selectRows(ctx context.Context, rec arrow.RecordBatch, rows []int, mem memory.Allocator) (arrow.RecordBatch, error) {
	if len(rows) == int(rec.NumRows()) {
		rec.Retain()
		return rec, nil
	}
	b := array.NewBooleanBuilder(mem)
	defer b.Release()
	k := 0
	for i := 0; i < int(rec.NumRows()); i++ {
		sel := k < len(rows) && rows[k] == i
		if sel {
			k++
		}
		b.Append(sel)
	}
	mask := b.NewBooleanArray()
	defer mask.Release()
	return compute.FilterRecordBatch(exec.WithAllocator(ctx, mem), rec, mask, compute.DefaultFilterOptions())
}

// withStatus returns rec with its status column replaced by the verdicts'
// status bits where the chain added some (e.g. StatusTriggerError), so the
// store keeps them; otherwise rec itself (retained).
func withStatus(rec arrow.RecordBatch, verdicts []Verdict, mem memory.Allocator) (arrow.RecordBatch, error) {
	idx := rec.Schema().FieldIndices(schemas.ColStatus)
	if len(idx) != 1 {
		return nil, fmt.Errorf("event batch has no %s column", schemas.ColStatus)
	}
	col := rec.Column(idx[0]).(*array.Uint32)
	changed := false
	for i := range verdicts {
		if uint32(verdicts[i].Status)|col.Value(i) != col.Value(i) {
			changed = true
			break
		}
	}
	if !changed {
		rec.Retain()
		return rec, nil
	}
	sb := array.NewUint32Builder(mem)
	defer sb.Release()
	sb.Reserve(len(verdicts))
	for i := range verdicts {
		sb.UnsafeAppend(col.Value(i) | uint32(verdicts[i].Status))
	}
	st := sb.NewArray()
	defer st.Release()
	cols := make([]arrow.Array, rec.NumCols())
	copy(cols, rec.Columns())
	cols[idx[0]] = st
	return array.NewRecordBatch(rec.Schema(), cols, rec.NumRows()), nil
}
