package builder

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/sluice-daq/sluice/schemas"
)

// denseSourceLimit: source ids up to this value are indexed by a flat table
// (4 bytes per id); larger ids fall back to a map.
const denseSourceLimit = 1 << 20

// Builder assembles fragments into events (or timeslices) and emits them as
// Arrow record batches. See the package doc for the algorithm.
type Builder struct {
	cfg    Config
	schema *arrow.Schema
	nsrc   int
	ids    []uint32 // source id by source index; group-major, in each group's order
	gstart []int    // source index where group g starts; len(Groups)+1
	grp    []int32  // group index by source index
	dense  []int32  // source id -> index+1 (0: unknown), when every id < denseSourceLimit
	sparse map[uint32]int32
	isTS   bool
	// Timeslice mode: Config.SliceDuration and Config.Overlap in ns.
	slice, overlap uint64

	out  chan arrow.RecordBatch
	wake chan struct{} // cap 1: tells the emitter to look again
	done chan struct{} // closed when the emitter has closed out

	mu      sync.Mutex
	table   eventTable
	emitted emittedWindow
	head    *event // oldest open event (first to time out)
	tail    *event
	ready   []*event // emitted, waiting for batch assembly, in emission order
	readyAt time.Time
	free    []*event
	held    int   // events open, ready or being assembled (<= MaxOpenEvents)
	heldB   int64 // their referenced payload bytes
	closed  bool
	handoff atomic.Bool   // a full batch was signalled: the adder yields to the emitter
	waiters int           // goroutines blocked in sleepLocked
	changed chan struct{} // closed and replaced when memory frees or batches go out, if waiters > 0
	moved   uint64        // events ever moved to ready
	taken   uint64        // events ever taken for assembly
	sent    uint64        // events ever delivered on out
	flushTo uint64        // the emitter closes partial batches until taken reaches this
	// relieved: flushTo was moved by Relieve; the next partial batch taken
	// counts in Ledger.BatchesRelieved.
	relieved bool

	// Timeslice mode: per source the highest timestamp seen, and their minimum.
	wm    []uint64
	minWM uint64
	atMin int
	seq   uint64

	ident       identity    // event identity: epochs, the reference (identity.go)
	behind      behindState // waiting for sources behind the others (behind.go)
	absent      []bool      // by source index: declared absent (absent.go)
	want        int         // sources an event needs to be complete: nsrc less the absent
	heldSuspect int         // open events opened by suspect fragments
	// Events opened by suspect fragments and not yet freed (open, ready or
	// assembling; <= MaxSuspectEvents): once confirmed and emitted they
	// stay in the suspect room until assembled, so that held stays within
	// MaxOpenEvents + MaxSuspectEvents and a suspect never waits for the
	// normal room.
	suspectHeld int
	asg         assignments // Config.Assigned (assign.go)
	// For the emitter to do outside the lock: fragment references to drop
	// (dissolved events) and notes to log.
	drops []*pktRef
	notes []note

	led    Ledger // counters only; Discarded is filled in by Ledger()
	disc   [nReasons]uint64
	lateBy []uint64 // late discards by source index
}

// New validates cfg, applies the defaults and starts the goroutine that
// handles timeouts, batch latency and batch assembly; Close stops it.
// Errors wrap ErrConfig and name the offending field: by its yaml key for
// the builder section's fields (Config.Validate), else by its Go name.
func New(cfg Config) (*Builder, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	schema, err := schemas.BuilderSchema(cfg.Mode, cfg.Groups)
	if err != nil {
		return nil, fmt.Errorf("%w: Groups: %v", ErrConfig, err)
	}
	b := &Builder{
		cfg:     cfg,
		schema:  schema,
		isTS:    cfg.Mode == schemas.ModeTimeslice,
		slice:   uint64(cfg.SliceDuration),
		overlap: uint64(cfg.Overlap),
		out:     make(chan arrow.RecordBatch, 1),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		table:   newEventTable(cfg.MaxOpenEvents + cfg.MaxSuspectEvents),
		emitted: newEmittedWindow(cfg.LateWindow),
		ready:   make([]*event, 0, cfg.MaxOpenEvents+cfg.MaxSuspectEvents),
		changed: make(chan struct{}),
		asg:     assignments{live: map[uint64]*assignment{}},
	}
	var maxID uint32
	for _, g := range cfg.Groups {
		b.gstart = append(b.gstart, len(b.ids))
		for _, s := range g.Sources {
			b.grp = append(b.grp, int32(len(b.gstart)-1))
			b.ids = append(b.ids, s)
			maxID = max(maxID, s)
		}
	}
	b.gstart = append(b.gstart, len(b.ids))
	b.nsrc = len(b.ids)
	if maxID < denseSourceLimit {
		b.dense = make([]int32, int(maxID)+1)
		for i, s := range b.ids {
			b.dense[s] = int32(i + 1)
		}
	} else {
		b.sparse = make(map[uint32]int32, b.nsrc)
		for i, s := range b.ids {
			b.sparse[s] = int32(i)
		}
	}
	if b.isTS {
		b.wm = make([]uint64, b.nsrc)
		b.atMin = b.nsrc
	}
	quorum := cfg.Quorum
	if quorum == 0 {
		quorum = b.nsrc/2 + 1
	}
	b.ident = newIdentity(b.nsrc, quorum, cfg.SuspectDistance, resetJump(cfg), cfg.Assigned)
	b.behind.seen = make([]activity, b.nsrc)
	b.absent, b.want = make([]bool, b.nsrc), b.nsrc
	b.lateBy = make([]uint64, b.nsrc)
	go b.run()
	return b, nil
}

// Schema is the schema of every batch: schemas.BuilderSchema(cfg.Mode,
// cfg.Groups), the event schema and the build columns.
func (b *Builder) Schema() *arrow.Schema { return b.schema }

// Batches delivers the event batches. The receiver owns each batch and must
// Release it. While nobody receives, no batch is assembled, held events pile
// up to the limits and adding blocks (backpressure). Closed by Close once
// every event is delivered.
func (b *Builder) Batches() <-chan arrow.RecordBatch { return b.out }

// sourceIndex maps a source id to its index; read-only after New, no lock.
func (b *Builder) sourceIndex(id uint32) (int32, bool) {
	if b.dense != nil {
		if int(id) < len(b.dense) {
			i := b.dense[id]
			return i - 1, i != 0
		}
		return 0, false
	}
	i, ok := b.sparse[id]
	return i, ok
}

// AddFragment hands one fragment to the builder. The payload must stay
// valid and unchanged until release is called (exactly once, possibly from
// another goroutine; release may be nil). It blocks while the open-event or
// buffered-byte limit is reached, until ctx is done: it then returns
// ctx.Err() and the fragment is counted as discarded ("cancelled"). After
// Close it returns ErrClosed ("closed"). Other discards (duplicate, late,
// unknown source) are counted in the Ledger and return nil; a payload of
// 4 GiB or more returns ErrTooLarge ("too_large"). Safe for concurrent use.
func (b *Builder) AddFragment(ctx context.Context, f schemas.Fragment, release func()) error {
	src, known := b.sourceIndex(f.SourceID)
	tooLarge := uint64(len(f.Payload)) > math.MaxUint32
	ref := newRef(release, 2)
	b.mu.Lock()
	b.offeredLocked(len(f.Payload))
	var err error
	switch {
	case b.closed:
		b.discardLocked(rClosed, ref)
		err = ErrClosed
	case !known:
		b.discardLocked(rUnknownSource, ref)
	case tooLarge:
		b.discardLocked(rTooLarge, ref)
		err = ErrTooLarge
	default:
		var now time.Time
		err = b.placeLocked(ctx, src, f.EventID, f.Flags, f.Payload, f.CRC, ref, &now)
	}
	b.checkLocked("AddFragment")
	b.mu.Unlock()
	ref.drop() // the guard
	b.yieldToEmitter()
	return err
}

// packetChunk is how many fragments of a packet are added under one lock
// acquisition.
const packetChunk = 64

// AddPacket hands every fragment of a multi-fragment packet to the builder
// (fragment i has event id p.FirstEventID+i and source p.SourceID); release
// is called once, when no fragment of the packet is needed any more. Blocking,
// cancellation and closing behave as for AddFragment; on cancellation the
// fragments not yet added are counted "cancelled".
func (b *Builder) AddPacket(ctx context.Context, p schemas.MFP, release func()) error {
	src, known := b.sourceIndex(p.SourceID)
	ref := newRef(release, p.N+1)
	var (
		pay     [packetChunk][]byte
		crcs    [packetChunk]uint32 // the CRC-32C each fragment came with
		n       int                 // fragments in the chunk
		first   uint64              // event id of the chunk's first fragment
		offered int                 // fragments handed to addChunk so far
		err     error
	)
	if !known {
		b.mu.Lock()
		b.countRestLocked(&p, 0, rUnknownSource, ref)
		b.checkLocked("AddPacket of an unknown source")
		b.mu.Unlock()
		ref.drop()
		return nil
	}
	p.Fragments(func(i int, eventID uint64, crc uint32, payload []byte) bool {
		if n == 0 {
			first = eventID
		}
		pay[n], crcs[n] = payload, crc
		n++
		if n < packetChunk && i < p.N-1 {
			return true
		}
		err = b.addChunk(ctx, src, first, p.Flags, pay[:n], crcs[:n], ref)
		offered += n
		n = 0
		return err == nil
	})
	if err != nil && offered < p.N {
		b.mu.Lock()
		b.countRestLocked(&p, offered, reasonOf(err), ref)
		b.checkLocked("AddPacket's discard of the rest")
		b.mu.Unlock()
	}
	ref.drop() // the guard
	b.yieldToEmitter()
	return err
}

// yieldToEmitter lets the emitter, just woken for a full batch, run on
// this P now: woken by a channel send it waits in this P's run queue, and
// another P took it only after ~0.4 ms at the median (`sluice bench
// --trace`, 2-core VM) while the adder kept this one; the batch's
// assembly is what frees the ring space the readout waits for.
func (b *Builder) yieldToEmitter() {
	if b.handoff.Load() && b.handoff.Swap(false) {
		runtime.Gosched()
	}
}

// offeredLocked counts one fragment of n payload bytes as offered, and
// the time of the first (b.mu held).
func (b *Builder) offeredLocked(n int) {
	if b.led.FragmentsIn == 0 {
		b.led.FirstFragmentAt = time.Now()
	}
	b.led.FragmentsIn++
	b.led.BytesIn += uint64(n)
}

// countRestLocked counts fragments from..N-1 of p as offered and discarded.
func (b *Builder) countRestLocked(p *schemas.MFP, from int, r reason, ref *pktRef) {
	for i := from; i < p.N; i++ {
		b.offeredLocked(p.Size(i))
		b.discardLocked(r, ref)
	}
}

// addChunk adds consecutive fragments of one packet under one lock. On
// error the fragments from the failing one on are counted as discarded.
func (b *Builder) addChunk(ctx context.Context, src int32, first uint64, flags schemas.FragmentFlag, pay [][]byte, crcs []uint32, ref *pktRef) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.checkLocked("addChunk")
	var now time.Time
	for i, payload := range pay {
		b.offeredLocked(len(payload))
		if b.closed {
			b.discardLocked(rClosed, ref)
			continue
		}
		// Fast path: event mode with room needs no wait loop.
		if !b.isTS && b.placeEventLocked(src, first+uint64(i), flags, payload, crcs[i], ref, &now) {
			continue
		}
		if err := b.placeLocked(ctx, src, first+uint64(i), flags, payload, crcs[i], ref, &now); err != nil {
			// Count the rest of the chunk with the same reason.
			for _, rest := range pay[i+1:] {
				b.offeredLocked(len(rest))
				b.discardLocked(reasonOf(err), ref)
			}
			return err
		}
	}
	if b.closed {
		return ErrClosed
	}
	return nil
}

// reasonOf is the discard reason for an error of waitLocked: the builder
// closed, or else the caller's context ended.
func reasonOf(err error) reason {
	if err == ErrClosed {
		return rClosed
	}
	return rCancelled
}

// discardLocked counts one discarded fragment and drops its reference (the
// guard keeps release from running under the lock).
func (b *Builder) discardLocked(r reason, ref *pktRef) {
	b.disc[r]++
	if ref != nil {
		ref.n.Add(-1)
	}
}

// placeLocked adds one fragment of a known source, waiting for room when a
// limit is reached. On a wait error (cancelled or closed) the fragment is
// counted with that reason and the error returned.
func (b *Builder) placeLocked(ctx context.Context, src int32, id uint64, flags schemas.FragmentFlag, payload []byte, crc uint32, ref *pktRef, now *time.Time) error {
	for {
		var ok bool
		if b.isTS {
			ok = b.placeSliceLocked(src, id, flags, payload, crc, ref, now)
		} else {
			ok = b.placeEventLocked(src, id, flags, payload, crc, ref, now)
		}
		if ok {
			return nil
		}
		// While it waits (the lock released), the fragment is offered but
		// neither open nor discarded: FragmentsWaiting keeps the ledger
		// balanced for snapshots taken meanwhile.
		b.led.FragmentsWaiting++
		err := b.waitLocked(ctx)
		b.led.FragmentsWaiting--
		if err != nil {
			b.discardLocked(reasonOf(err), ref)
			return err
		}
		*now = time.Time{} // time passed while waiting
	}
}

// roomLocked reports whether `events` more events and `bytes` more payload
// bytes fit within the limits (suspect events have their own). A
// fragment is never refused while nothing is held, so that one larger than
// MaxBufferedBytes cannot block forever.
func (b *Builder) roomLocked(events int, bytes int64) bool {
	if b.held == 0 {
		return true
	}
	return b.held-b.suspectHeld+events <= b.cfg.MaxOpenEvents && b.heldB+bytes <= b.cfg.MaxBufferedBytes
}

// suspectRoomLocked reports whether source src may open a suspect event
// with bytes more payload bytes. A source holds at most a quarter of
// MaxSuspectEvents, so that one source's bad ids cannot take the room the
// others need while a counter reset or a common jump is confirmed.
// Suspect fragments never wait for room.
func (b *Builder) suspectRoomLocked(src int32, bytes int64) bool {
	return b.suspectHeld < b.cfg.MaxSuspectEvents && b.ident.heldBy[src] < max(1, b.cfg.MaxSuspectEvents/4) &&
		(b.held == 0 || b.heldB+bytes <= b.cfg.MaxBufferedBytes)
}

// placeEventLocked is the per-fragment hot path of event mode. It returns
// false when the fragment does not fit yet; it may then have moved its
// source between epochs, which a retry finds done (see classifyLocked).
// crc is the CRC-32C the source sent, checked at assembly.
func (b *Builder) placeEventLocked(src int32, id uint64, flags schemas.FragmentFlag, payload []byte, crc uint32, ref *pktRef, now *time.Time) bool {
	si := &b.ident.src[src]
	prev := si.last
	ev := b.table.get(id, si.ep)
	if ev == nil || ev.held || (id < prev && prev-id > b.ident.jump) {
		// Not open; or open on a suspect's word only; or the source's
		// counter went back (an event of the epoch before may still be
		// open under that id): the fragment's id must be judged.
		var ok bool
		if ev, ok = b.openEventLocked(src, id, ev, len(payload), ref, now); !ok {
			return false
		}
		if ev == nil { // discarded, counted
			si.last = id
			si.n++
			if b.want != b.nsrc && b.absent[src] {
				b.presentAgainLocked(src)
			}
			return true
		}
	}
	si.last = id
	si.n++
	if b.want != b.nsrc && b.absent[src] {
		b.presentAgainLocked(src)
	}
	s := &ev.slots[src]
	if s.state != 0 {
		// First wins: the event keeps the fragment it already has.
		ev.status |= schemas.StatusDuplicates
		ev.dups = addSource(ev.dups, src)
		b.discardLocked(rDuplicate, ref)
		return true
	}
	// An event without fragments was just opened for this one, its room
	// checked by the open: it must not wait now (it would leave an open
	// event with no fragment when its wait is cancelled).
	if ev.frags > 0 && !b.roomLocked(0, int64(len(payload))) {
		return false
	}
	state := slotPresent
	if ref != nil {
		state |= slotRef
	}
	if flags&(schemas.FlagSourceError|schemas.FlagTruncated) != 0 {
		ev.status |= schemas.StatusSourceError
	}
	s.set(payload, crc, ref, state)
	ev.present++
	ev.frags++
	ev.bytes += int64(len(payload))
	ev.gbytes[b.grp[src]] += int64(len(payload))
	b.heldB += int64(len(payload))
	b.led.FragmentsOpen++
	if ev.present >= b.want {
		b.emitLocked(ev)
	}
	return true
}

// openEventLocked is the slow path of event mode, for a fragment whose
// event is not open (found nil) or must be judged anyway (see
// placeEventLocked): it returns the event to place the fragment in (the
// one found, when the source stays in its epoch; one found under another
// epoch; or one opened), or (nil, true) when the fragment was discarded
// (counted), or (nil, false) when it must wait for room.
func (b *Builder) openEventLocked(src int32, id uint64, found *event, size int, ref *pktRef, now *time.Time) (*event, bool) {
	if b.cfg.Assigned {
		if found != nil {
			return found, true // assignments have no epochs and no suspects
		}
		return b.openAssignedLocked(src, id, size, ref, now)
	}
	was := b.ident.src[src].ep
	e, v, judge := b.classifyLocked(src, id, b.ident.src[src].last)
	if e == was && found != nil {
		return found, true
	}
	if e != was {
		if ev := b.table.get(id, e); ev != nil {
			return ev, true
		}
	}
	switch v {
	case vLate:
		b.lateLocked(id, e, src)
		b.discardLocked(rLate, ref)
		return nil, true
	case vSuspect:
		if !b.suspectRoomLocked(src, int64(size)) {
			if e == b.ident.epoch+1 {
				b.discardResetLocked(src, ref)
			} else {
				b.discardSuspectLocked(src, ref)
			}
			return nil, true
		}
		ev := b.openLocked(id, e, now)
		ev.held, ev.suspect, ev.judge, ev.opener = true, true, true, src
		b.heldSuspect++
		b.suspectHeld++
		b.ident.heldBy[src]++
		return ev, true
	}
	if !b.roomLocked(1, int64(size)) {
		return nil, false
	}
	ev := b.openLocked(id, e, now)
	ev.judge = judge
	return ev, true
}

// openLocked takes an event from the pool (allocating only when the pool is
// empty) and makes it the newest open event, of key in epoch ep.
func (b *Builder) openLocked(key uint64, ep uint32, now *time.Time) *event {
	var ev *event
	if k := len(b.free); k > 0 {
		ev = b.free[k-1]
		b.free = b.free[:k-1]
	} else {
		ev = &event{gbytes: make([]int64, len(b.cfg.Groups))}
		if b.isTS {
			ev.coreN = make([]uint32, b.nsrc)
		} else {
			ev.slots = make([]slot, b.nsrc)
		}
	}
	if now.IsZero() {
		*now = time.Now()
	}
	ev.key, ev.epoch, ev.first, ev.open = key, ep, *now, true
	b.table.put(ev)
	b.held++
	ev.prev = b.tail
	if b.tail != nil {
		b.tail.next = ev
	} else {
		b.head = ev
		b.signal() // the emitter may be sleeping without a timeout deadline
	}
	b.tail = ev
	return ev
}

// emitLocked moves an open event to the ready queue: it is no longer
// findable, so its key is remembered for late detection (in its epoch, as
// a lower edge only when a quorum of sources sent to it; package doc).
func (b *Builder) emitLocked(ev *event) {
	b.unlinkLocked(ev)
	switch {
	case ev.asg != nil:
		b.emittedAssignedLocked(ev)
	case ev.epoch == b.ident.epoch:
		b.emitted.mark(ev.key, ev.present >= b.ident.quorum)
	}
	b.ready = append(b.ready, ev)
	b.moved++
	switch len(b.ready) {
	case 1:
		b.readyAt = time.Now()
		b.signal() // start the batch-latency clock
	case b.cfg.BatchEvents:
		b.signal()
		b.handoff.Store(true)
	}
}

// unlinkLocked takes an open event out of the table and the FIFO.
func (b *Builder) unlinkLocked(ev *event) {
	b.table.remove(ev)
	ev.open = false
	if ev.held {
		ev.held = false
		b.heldSuspect--
		b.ident.heldBy[ev.opener]--
	}
	if ev.prev != nil {
		ev.prev.next = ev.next
	} else {
		b.head = ev.next
	}
	if ev.next != nil {
		ev.next.prev = ev.prev
	} else {
		b.tail = ev.prev
	}
	ev.prev, ev.next = nil, nil
}

// lateScan bounds how many of the newest ready events lateLocked looks
// through: a late fragment mostly follows its event's timeout closely,
// and a storm of late fragments must not cost a scan of the whole queue
// each.
const lateScan = 1024

// lateLocked records source src as late on the event (key, epoch) when
// it is still ready (emitted, its batch not assembled yet) among the
// newest lateScan, or as duplicated when the event has its fragment
// already, and counts the late fragment for src; the fragment itself is
// discarded by the caller (counted late).
func (b *Builder) lateLocked(key uint64, epoch uint32, src int32) {
	b.lateBy[src]++
	for i, n := len(b.ready)-1, 0; i >= 0 && n < lateScan; i, n = i-1, n+1 {
		if ev := b.ready[i]; ev.key == key && ev.epoch == epoch {
			if !b.isTS && ev.slots[src].state != 0 {
				// It sent this event before: a duplicate, after the emission.
				ev.status |= schemas.StatusDuplicates
				ev.dups = addSource(ev.dups, src)
			} else {
				ev.lates = addSource(ev.lates, src)
			}
			return
		}
	}
}

// signal wakes the emitter without blocking.
func (b *Builder) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// broadcastLocked wakes every goroutine blocked in sleepLocked.
func (b *Builder) broadcastLocked() {
	if b.waiters > 0 {
		close(b.changed)
		b.changed = make(chan struct{})
	}
}

// waitLocked releases the lock until memory is freed or batches go out, or
// ctx is done. It asks the emitter to close a partial batch, since held
// events in the ready queue only free memory once assembled.
func (b *Builder) waitLocked(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.signal()
	if err := b.sleepLocked(ctx); err != nil {
		return err
	}
	if b.closed {
		return ErrClosed
	}
	return nil
}

// sleepLocked releases the lock until the next broadcastLocked or until
// ctx is done, and returns ctx.Err().
func (b *Builder) sleepLocked(ctx context.Context) error {
	b.waiters++
	ch := b.changed
	b.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
	}
	b.mu.Lock()
	b.waiters--
	return ctx.Err()
}

// flushLocked emits every open event, as at its timeout, and makes the
// emitter close partial batches until they are all taken.
func (b *Builder) flushLocked() uint64 {
	for b.head != nil {
		b.retireLocked(b.head)
	}
	b.flushTo = b.moved
	b.signal()
	b.checkLocked("flush")
	return b.moved
}

// Relieve closes the current batch now, partial, when events wait in it:
// the readout's buffer they hold (transport.Relieving) is then released
// once it is assembled, not after BatchLatency. A batch so closed counts
// in Ledger.BatchesRelieved. It reports whether any held fragment is on
// its way back: events were ready or are being assembled (false: every
// held event is still open).
func (b *Builder) Relieve() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.ready) == 0 {
		return b.taken > b.sent // a batch being assembled drops its references
	}
	if b.flushTo < b.moved {
		b.flushTo = b.moved
		b.relieved = true
		b.signal()
	}
	return true
}

// Flush emits every open event now (incomplete ones flagged, as at their
// timeout) and closes the current batch; it returns once all of them were
// delivered on Batches(), or with ctx.Err() when ctx ends first (they are
// still delivered later).
func (b *Builder) Flush(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	target := b.flushLocked()
	for b.sent < target {
		if err := b.sleepLocked(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Close refuses further fragments (ErrClosed), flushes, and returns once
// every batch was delivered and Batches() is closed, or with ctx.Err()
// (then the emitter still finishes in the background). Idempotent.
func (b *Builder) Close(ctx context.Context) error {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		b.flushLocked()
		b.expireAssignmentsLocked(time.Time{}, true)
		b.broadcastLocked() // blocked adders give up with ErrClosed
	}
	b.mu.Unlock()
	select {
	case <-b.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Ledger returns a consistent snapshot of the counters.
func (b *Builder) Ledger() Ledger {
	b.mu.Lock()
	l := b.led
	l.EventsWaitedBehind = b.behind.events
	d := b.disc
	suspects, resets, lates := b.bySourceLocked(b.ident.suspectBy), b.bySourceLocked(b.ident.resetsBy), b.bySourceLocked(b.lateBy)
	b.mu.Unlock()
	l.Discarded = make(map[string]uint64, nReasons)
	for r, v := range d {
		l.Discarded[reasonNames[r]] = v
	}
	l.SuspectBySource, l.ResetsBySource, l.LateBySource = suspects, resets, lates
	return l
}

// bySourceLocked maps the non-zero counts of vs (by source index) to
// their source ids; nil when none.
func (b *Builder) bySourceLocked(vs []uint64) map[uint32]uint64 {
	var m map[uint32]uint64
	for i, v := range vs {
		if v > 0 {
			if m == nil {
				m = map[uint32]uint64{}
			}
			m[b.ids[i]] = v
		}
	}
	return m
}
