package builder

import (
	"time"

	"github.com/sluice-daq/sluice/schemas"
)

// run is the builder's one background goroutine. It times events out,
// decides when a batch closes, assembles it outside the lock (the one copy
// of the payload bytes), returns the events to the pool and delivers the
// batch. While the receiver does not take a batch, nothing else is
// assembled: held events then reach the limits and adding blocks.
func (b *Builder) run() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	batch := make([]*event, 0, b.cfg.BatchEvents)
	asm := newAssembler(b)
	defer asm.help.close()
	var out outWork
	for {
		b.mu.Lock()
		now := time.Now()
		b.expireLocked(now)
		batch = b.takeLocked(now, batch[:0])
		b.checkLocked("expire and take")
		if len(batch) == 0 {
			b.takeOutLocked(&out)
			end := b.closed && b.head == nil && len(b.ready) == 0
			wait := b.nextDeadlineLocked(now)
			b.mu.Unlock()
			b.doOut(&out)
			if end {
				close(b.out)
				close(b.done)
				return
			}
			timer.Reset(wait)
			select {
			case <-b.wake:
			case <-timer.C:
			}
			continue
		}
		b.mu.Unlock()

		rec := asm.assemble(batch)

		b.mu.Lock()
		b.accountLocked(batch)
		b.checkLocked("batch assembly")
		b.mu.Unlock()
		b.out <- rec
		b.mu.Lock()
		b.sent += uint64(len(batch))
		b.broadcastLocked()
		b.takeOutLocked(&out) // assignment reports after their events' delivery
		b.mu.Unlock()
		b.doOut(&out)
	}
}

// outWork is what the emitter does outside the lock: drop the references
// of dissolved events' fragments (a caller's release must not run under
// the lock), log, and report done assignments.
type outWork struct {
	drops   []*pktRef
	notes   []note
	reports []AssignmentReport
}

// takeOutLocked swaps the pending work into w (whose slices, already done,
// become the builder's empty ones: no allocation in steady state).
func (b *Builder) takeOutLocked(w *outWork) {
	w.drops, b.drops = b.drops, w.drops[:0]
	w.notes, b.notes = b.notes, w.notes[:0]
	w.reports, b.asg.reports = b.asg.reports, w.reports[:0]
}

func (b *Builder) doOut(w *outWork) {
	for _, r := range w.drops {
		r.drop()
	}
	clear(w.drops)
	b.logNotes(w.notes)
	if f := b.cfg.OnAssignmentDone; f != nil {
		for _, r := range w.reports {
			f(r)
		}
	}
	clear(w.reports)
}

// expireLocked emits, as incomplete, the open events whose timeout passed
// (or dissolves those judged suspect) unless the oldest waits for a source
// behind it (behind.go), then ends the idle assignments. The FIFO is in
// order of first arrival, so the events are all at its head.
func (b *Builder) expireLocked(now time.Time) {
	b.behind.waiting = false
	b.noteActivityLocked(now)
	for b.head != nil && now.Sub(b.head.first) >= b.cfg.Timeout {
		if b.waitBehindLocked(b.head, now) {
			break
		}
		b.retireLocked(b.head)
	}
	if len(b.asg.live) > 0 {
		b.expireAssignmentsLocked(now, false)
	}
}

// takeLocked moves the next batch's events (at most BatchEvents) from the
// ready queue into dst when a batch must close: it is full, its latency
// passed, a Flush or Close asked, or adders are blocked waiting for memory.
func (b *Builder) takeLocked(now time.Time, dst []*event) []*event {
	n := len(b.ready)
	if n == 0 {
		return dst
	}
	if n < b.cfg.BatchEvents && now.Sub(b.readyAt) < b.cfg.BatchLatency && b.taken >= b.flushTo && b.waiters == 0 && !b.closed {
		return dst
	}
	if n < b.cfg.BatchEvents && b.relieved && b.taken < b.flushTo && now.Sub(b.readyAt) < b.cfg.BatchLatency && b.waiters == 0 && !b.closed {
		b.led.BatchesRelieved++
	}
	b.relieved = b.relieved && b.taken+uint64(min(n, b.cfg.BatchEvents)) < b.flushTo
	n = min(n, b.cfg.BatchEvents)
	dst = append(dst, b.ready[:n]...)
	rest := copy(b.ready, b.ready[n:])
	clear(b.ready[rest:])
	b.ready = b.ready[:rest]
	b.readyAt = now // the remaining events start the next batch
	b.taken += uint64(n)
	return dst
}

// nextDeadlineLocked is how long the emitter may sleep: until the oldest
// open event times out or the current batch's latency passes.
func (b *Builder) nextDeadlineLocked(now time.Time) time.Duration {
	d := time.Hour
	if b.head != nil {
		d = min(d, b.head.first.Add(b.cfg.Timeout).Sub(now))
	}
	if b.behind.waiting {
		d = min(d, b.behindRecheck())
	}
	if len(b.ready) > 0 {
		d = min(d, b.readyAt.Add(b.cfg.BatchLatency).Sub(now))
	}
	if len(b.asg.live) > 0 {
		d = b.assignmentDeadlineLocked(now, d)
	}
	return max(d, 0)
}

// accountLocked moves the assembled events from open to built in the
// ledger, frees their memory and returns them to the pool.
func (b *Builder) accountLocked(batch []*event) {
	for _, ev := range batch {
		b.held--
		if ev.suspect {
			b.suspectHeld--
		}
		b.heldB -= ev.bytes
		b.led.FragmentsOpen -= uint64(ev.frags)
		b.led.FragmentsInEvents += uint64(ev.frags - ev.dupCore)
		b.disc[rDuplicate] += uint64(ev.dupCore)
		b.led.EventsBuilt++
		if ev.status&schemas.StatusIncomplete != 0 {
			b.led.EventsIncomplete++
		} else {
			b.led.EventsComplete++
		}
		if ev.status&schemas.StatusCorrupt != 0 {
			b.led.EventsCorrupt++
		}
		if ev.status&schemas.StatusSourceError != 0 {
			b.led.EventsSourceError++
		}
		if ev.asg != nil {
			b.deliveredAssignedLocked(ev)
		}
		ev.reset()
		b.free = append(b.free, ev)
	}
	b.led.BatchesBuilt++
	b.broadcastLocked()
}
