package builder

import (
	"math"
	"slices"
)

// Event identity (event mode, without Config.Assigned): which event a
// fragment's id names, when a source's id cannot be trusted, and when the
// sources' counters were reset. The rule is stated in the package doc,
// "Event identity"; this is its state and its slow path, run only when a
// fragment's event is not open.

// noEpoch is the epoch of a source that has sent nothing yet.
const noEpoch = math.MaxUint32

// refStale: the reference is recomputed after this many fragments per
// source even when nothing looks wrong, so that it follows the sources.
const refStale = 64

// srcIdentity is what the hot path reads and writes per source, side by
// side so that a packet costs one cache line of it.
type srcIdentity struct {
	last uint64 // the id of the source's latest fragment
	n    uint64 // its fragments placed or judged (behind.go: is it still sending?)
	ep   uint32 // the epoch its fragments belong to; noEpoch before its first
}

// identity is the per-source state of the rule. Slices are by source index.
type identity struct {
	src []srcIdentity

	epoch   uint32 // the current epoch: counter resets so far
	inEpoch int    // sources with ep == epoch
	votes   int    // sources with ep == epoch+1: they jumped back, the reset not yet confirmed
	quorum  int
	dist    uint64 // Config.SuspectDistance

	ref      uint64 // the reference: the median of last over the sources in epoch
	refOK    bool   // whether the reference exists (a quorum of sources sent)
	refAt    uint64 // FragmentsIn when ref was computed
	refDirty bool   // a source entered or left the epoch since
	scratch  []uint64

	suspectBy []uint64 // suspect_id discards by source index
	heldBy    []int    // open suspect events by the source index that opened them

	// A source's own counter reset (cold, by source index): jump is how
	// far back its ids must go (resetJump); resetFrom and resetTo its ids
	// before and after its latest vote; resetNoted whether that reset was
	// counted in resetsBy (and logged), which happens once no quorum
	// followed it (its first held event dissolved).
	jump       uint64
	resetFrom  []uint64
	resetTo    []uint64
	resetNoted []bool
	resetsBy   []uint64
}

// resetJump is how far a source's ids must go back, and below the
// reference, for its counter to be taken as reset: a quarter of the events
// the builder holds, at least 256, at most SuspectDistance. Reordering on
// the way moves a source's ids back by a few packets (a reorder window, a
// packet sent twice); a source behind the others never goes back. SuspectDistance
// math.MaxUint64 turns the event-identity rule off, resets included.
func resetJump(cfg Config) uint64 {
	if cfg.SuspectDistance == math.MaxUint64 {
		return math.MaxUint64
	}
	return min(cfg.SuspectDistance, max(256, uint64(cfg.MaxOpenEvents)/4))
}

// newIdentity starts every source without an epoch, or (fixed, in assigned
// mode, where the rule does not apply) in epoch 0.
func newIdentity(nsrc, quorum int, dist, jump uint64, fixed bool) identity {
	d := identity{src: make([]srcIdentity, nsrc), quorum: quorum, dist: dist,
		scratch: make([]uint64, 0, nsrc), suspectBy: make([]uint64, nsrc), heldBy: make([]int, nsrc),
		jump: jump, resetFrom: make([]uint64, nsrc), resetTo: make([]uint64, nsrc), resetNoted: make([]bool, nsrc), resetsBy: make([]uint64, nsrc)}
	if fixed {
		d.inEpoch = nsrc
		return d
	}
	for i := range d.src {
		d.src[i].ep = noEpoch
	}
	return d
}

// far reports whether id k is more than dist from the reference.
func (d *identity) far(k uint64) bool {
	if k > d.ref {
		return k-d.ref > d.dist
	}
	return d.ref-k > d.dist
}

// recompute sets the reference: the lower median of the latest ids of the
// sources in the current epoch, which exists once a quorum of sources has
// sent in it (voters for a reset included, so that votes do not take the
// reference away before they reach the quorum themselves).
func (d *identity) recompute(at uint64) {
	d.refAt, d.refDirty = at, false
	d.refOK = d.inEpoch > 0 && d.inEpoch+d.votes >= d.quorum
	if !d.refOK {
		return
	}
	xs := d.scratch[:0]
	for _, s := range d.src {
		if s.ep == d.epoch {
			xs = append(xs, s.last)
		}
	}
	d.ref = selectKth(xs, (len(xs)-1)/2)
}

// referenceLocked returns the reference, recomputing it when sources
// entered or left the epoch, when refStale fragments per source arrived
// since, or, with fresh (before a fragment is called suspect), when one
// per source did. It costs O(sources) when it recomputes, so that a stream
// of suspect fragments pays at most that once per round of all sources.
func (b *Builder) referenceLocked(fresh bool) (uint64, bool) {
	d := &b.ident
	since := b.led.FragmentsIn - d.refAt
	if d.refDirty || since >= refStale*uint64(b.nsrc) || (fresh && since >= uint64(b.nsrc)) {
		d.recompute(b.led.FragmentsIn)
	}
	return d.ref, d.refOK
}

// verdict is what classifyLocked decided for a fragment whose event is not
// open.
type verdict uint8

const (
	vOpen    verdict = iota // open an event for it
	vSuspect                // hold it in a suspect event, or discard it as suspect_id when none fits
	vLate                   // discard it as late
)

// classifyLocked decides what a fragment of source src with id k, whose
// event (k in the source's epoch) is not open, is; prev is the id of the
// source's fragment before it. It returns the epoch the fragment belongs
// to (the source may have moved: joined the current epoch, voted for a
// reset, or triggered one), the verdict, and for vOpen whether the event
// must be judged at its timeout (it was opened without a reference).
// Calling it again for the same fragment, after waiting for room, gives
// the same answer: every move it makes is to the state the second call
// expects.
func (b *Builder) classifyLocked(src int32, k, prev uint64) (uint32, verdict, bool) {
	d := &b.ident
	e := d.src[src].ep
	if e == noEpoch {
		d.src[src].ep, e = d.epoch, d.epoch
		d.inEpoch++
		d.refDirty = true
		prev = k
	}
	// Whether the source's own counter went back by more than jump.
	back := k < prev && prev-k > d.jump
	ref, ok := b.referenceLocked(false)
	far := ok && d.far(k)
	if far || back {
		ref, ok = b.referenceLocked(true)
		far = ok && d.far(k)
	}
	switch {
	case e == d.epoch:
		if !far {
			// Near the others; but when its own counter went back by more
			// than jump, to more than jump below the reference (from among
			// the others', not from a far id of its own), it was reset.
			if back && ok && k+d.jump < ref && !d.far(prev) {
				return b.voteLocked(src, k, prev, ref)
			}
			return b.normalLocked(e, k, ok)
		}
		if !back || k > ref {
			return e, vSuspect, true
		}
		// Far behind the others and its own counter went back.
		return b.voteLocked(src, k, prev, ref)
	case e == d.epoch+1:
		if ok && !far && k+d.jump >= ref {
			// Back among the others (no more than jump below the
			// reference): it caught up after its reset, or the jump was a
			// glitch.
			d.src[src].ep = d.epoch
			d.votes--
			d.inEpoch++
			d.refDirty = true
			if d.resetNoted[src] {
				b.notes = append(b.notes, note{kind: noteCaughtUp, src: b.ids[src], key: k})
			}
			return b.normalLocked(d.epoch, k, true)
		}
		return e, vSuspect, true
	default:
		// A source still in an earlier epoch: its counter was not reset
		// with the others' (or not yet). It joins the current epoch when
		// its counter jumps back too, or its ids are near the others'.
		if back || (ok && !far) {
			d.src[src].ep = d.epoch
			d.inEpoch++
			d.refDirty = true
			return b.normalLocked(d.epoch, k, ok)
		}
		// Its event of the earlier epoch was emitted (or never opened by
		// anyone): nothing can take the fragment any more.
		return e, vLate, false
	}
}

// voteLocked: source src's counter went back from prev to k, more than
// jump below the reference ref. It votes for a counter
// reset: its fragments go to the next epoch (held events, never waited
// for as a source behind). With a quorum of votes that epoch is the
// current one (a resync); a vote no quorum follows is the source's own
// reset (noteResetLocked), its fragments discarded as reset until it
// catches up.
func (b *Builder) voteLocked(src int32, k, prev, ref uint64) (uint32, verdict, bool) {
	d := &b.ident
	d.src[src].ep = d.epoch + 1
	d.inEpoch--
	d.votes++
	d.refDirty = true
	d.resetFrom[src], d.resetTo[src], d.resetNoted[src] = prev, k, false
	if d.votes < d.quorum {
		return d.epoch + 1, vSuspect, true
	}
	d.src[src].last = k // the new epoch's reference includes this source's new position
	b.resyncLocked(ref)
	return b.normalLocked(d.epoch, k, true)
}

// noteResetLocked counts and logs, once per vote, the counter reset of
// source src, which still votes and no quorum followed.
func (b *Builder) noteResetLocked(src int32) {
	d := &b.ident
	if d.resetNoted[src] {
		return
	}
	d.resetNoted[src] = true
	d.resetsBy[src]++
	b.notes = append(b.notes, note{kind: noteReset, src: b.ids[src], from: d.resetFrom[src], to: d.resetTo[src], key: d.ref, refOK: d.refOK})
}

// discardResetLocked counts a fragment of a source voting for a reset
// that found no room in the suspect events; with none of its own open,
// its reset is noted now.
func (b *Builder) discardResetLocked(src int32, ref *pktRef) {
	if b.ident.heldBy[src] == 0 {
		b.noteResetLocked(src)
	}
	b.discardLocked(rReset, ref)
}

// normalLocked applies the late rule to an id near the reference (or with
// no reference yet) in the current epoch e.
func (b *Builder) normalLocked(e uint32, k uint64, refOK bool) (uint32, verdict, bool) {
	if b.emitted.late(k) {
		return e, vLate, false
	}
	return e, vOpen, !refOK
}

// resyncLocked declares a counter reset: the voters form the new epoch,
// the others stay in the old one until they follow; the late window
// forgets the old epoch's ids. Events of the old epoch still open go on
// being built with the fragments of the sources still in it.
func (b *Builder) resyncLocked(from uint64) {
	d := &b.ident
	d.epoch++
	d.inEpoch, d.votes = d.votes, 0
	d.recompute(b.led.FragmentsIn)
	b.emitted.reset()
	b.led.Resyncs++
	b.notes = append(b.notes, note{kind: noteResync, epoch: d.epoch, n: d.inEpoch, from: from, to: d.ref})
	b.signal()
}

// judgeLocked decides, at its timeout or a flush, whether an event opened
// suspect or without a reference is emitted (true) or dissolved: it is
// dissolved when fewer than a quorum of sources sent to it and its id is
// not (or no longer) near the reference of the current epoch. A suspect
// event of another epoch (one before a reset, or a refuted vote for the
// next) is dissolved; one opened without a reference before a reset is not
// judged by the new epoch's.
func (b *Builder) judgeLocked(ev *event) bool {
	d := &b.ident
	if ev.present >= d.quorum {
		return true
	}
	if ev.epoch != d.epoch {
		return !ev.held
	}
	_, ok := b.referenceLocked(true)
	return !ok || !d.far(ev.key)
}

// retireLocked takes a timed-out (or flushed) open event out: emitted, or
// dissolved when it was to be judged and fails.
func (b *Builder) retireLocked(ev *event) {
	if ev.judge && !b.judgeLocked(ev) {
		b.dissolveLocked(ev)
		return
	}
	b.emitLocked(ev)
}

// dissolveLocked discards every fragment of an open event instead of
// emitting it: as reset when the event is of the next epoch and its
// source still votes for a reset (whose reset is then noted: no quorum
// followed it) or was counted reset (it caught up since), else as
// suspect_id (by source). Its id is not remembered
// as emitted, so the others' fragments for it, if they come, open it
// anew. Fragment references are dropped by the emitter, outside the lock.
func (b *Builder) dissolveLocked(ev *event) {
	b.unlinkLocked(ev)
	first := int32(-1)
	next := ev.epoch == b.ident.epoch+1
	for k := range ev.slots {
		s := &ev.slots[k]
		if s.state == 0 {
			continue
		}
		if next && (b.ident.src[k].ep == ev.epoch || b.ident.resetNoted[k]) {
			b.disc[rReset]++
			b.noteResetLocked(int32(k))
		} else {
			if first < 0 {
				first = int32(k)
			}
			b.disc[rSuspect]++
			b.ident.suspectBy[k]++
		}
		if s.state&slotRef != 0 {
			b.drops = append(b.drops, s.ref)
		}
		*s = slot{}
	}
	if first >= 0 {
		b.notes = append(b.notes, note{kind: noteSuspect, epoch: ev.epoch, key: ev.key, n: ev.frags, src: b.ids[first], to: b.ident.ref, refOK: b.ident.refOK})
	}
	b.led.FragmentsOpen -= uint64(ev.frags)
	b.held--
	if ev.suspect {
		b.suspectHeld--
	}
	b.heldB -= ev.bytes
	ev.reset()
	b.free = append(b.free, ev)
	b.broadcastLocked()
	b.signal() // the emitter drops the references and logs
}

// discardSuspectLocked counts a suspect fragment that found no room in the
// suspect events.
func (b *Builder) discardSuspectLocked(src int32, ref *pktRef) {
	b.ident.suspectBy[src]++
	b.discardLocked(rSuspect, ref)
}

// note is something the emitter logs outside the lock.
type note struct {
	kind     uint8
	epoch    uint32
	n        int // resync: sources in the new epoch; suspect: fragments discarded
	src      uint32
	key      uint64 // suspect: the event id; reset: the reference; caught up: the id
	from, to uint64 // resync: reference before and after; suspect: to = reference; reset: the source's ids before and after
	refOK    bool
}

const (
	noteResync uint8 = iota
	noteSuspect
	noteReset
	noteCaughtUp
)

// logNotes writes the notes taken since the last call (emitter goroutine).
func (b *Builder) logNotes(notes []note) {
	log := b.cfg.Logger
	if log == nil {
		return
	}
	for _, n := range notes {
		switch n.kind {
		case noteResync:
			log.Warn("event counter reset (resync) detected: events from here on build in a new epoch",
				"epoch", n.epoch, "sources", n.n, "of", b.nsrc, "from_id", n.from, "to_id", n.to)
		case noteSuspect:
			attrs := []any{"source", n.src, "event_id", n.key, "fragments", n.n, "epoch", n.epoch}
			if n.refOK {
				attrs = append(attrs, "reference_id", n.to)
			}
			log.Warn("event id far from the other sources' and never confirmed: fragments discarded as suspect_id", attrs...)
		case noteReset:
			attrs := []any{"source", n.src, "from_id", n.from, "to_id", n.to}
			if n.refOK {
				attrs = append(attrs, "reference_id", n.key)
			}
			log.Warn("event counter reset of one source: its ids went back onto events built already while the others went on; its fragments are discarded as reset until its ids are back among the others'", attrs...)
		case noteCaughtUp:
			log.Info("source's event ids back among the other sources' after its counter reset: its fragments build again", "source", n.src, "event_id", n.key)
		}
	}
}

// selectKth returns the k-th smallest of xs (0-based), reordering xs: a
// quickselect with median-of-three pivots that sorts what is left after a
// bounded number of rounds, so adversarial ids cannot make it quadratic.
func selectKth(xs []uint64, k int) uint64 {
	lo, hi := 0, len(xs)-1
	for round := 0; hi > lo; round++ {
		if round == 48 {
			slices.Sort(xs[lo : hi+1])
			break
		}
		m := lo + (hi-lo)/2
		if xs[m] < xs[lo] {
			xs[m], xs[lo] = xs[lo], xs[m]
		}
		if xs[hi] < xs[lo] {
			xs[hi], xs[lo] = xs[lo], xs[hi]
		}
		if xs[hi] < xs[m] {
			xs[hi], xs[m] = xs[m], xs[hi]
		}
		p := xs[m]
		i, j := lo, hi
		for i <= j {
			for xs[i] < p {
				i++
			}
			for xs[j] > p {
				j--
			}
			if i <= j {
				xs[i], xs[j] = xs[j], xs[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return xs[k]
		}
	}
	return xs[k]
}
