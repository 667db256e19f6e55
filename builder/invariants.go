package builder

import (
	"math/bits"

	"github.com/sluice-daq/sluice/internal/invariants"
)

// checkLocked verifies the builder's invariants (see the package doc) when
// built with the invariants tag; it costs a walk over every open event, so
// normal builds compile it away. where names the operation just done.
func (b *Builder) checkLocked(where string) {
	if !invariants.Enabled {
		return
	}
	fail := func(format string, args ...any) {
		invariants.Failf("builder", "after "+where+": "+format, args...)
	}
	var disc uint64
	for _, v := range b.disc {
		disc += v
	}
	l := &b.led
	if l.FragmentsIn != l.FragmentsInEvents+l.FragmentsOpen+l.FragmentsWaiting+disc {
		fail("ledger: in %d != in events %d + open %d + waiting %d + discarded %d",
			l.FragmentsIn, l.FragmentsInEvents, l.FragmentsOpen, l.FragmentsWaiting, disc)
	}

	// The open events: a doubly linked FIFO, every one findable in the table.
	open, openFrags, openHeld, suspects := 0, 0, 0, 0
	heldBy := map[int32]int{}
	asgEvents := map[*assignment]int{}
	var bytes int64
	var prev *event
	for ev := b.head; ev != nil; ev = ev.next {
		if ev.prev != prev {
			fail("open list: event %d's prev is not the event before it", ev.key)
		}
		if !ev.open {
			fail("open list: event %d is not marked open", ev.key)
		}
		if got := b.table.get(ev.key, ev.epoch); got != ev {
			fail("open event %d is not found under its key in the table", ev.key)
		}
		if !b.isTS {
			present := 0
			var evBytes int64
			for i := range ev.slots {
				if ev.slots[i].state != 0 {
					present++
					evBytes += int64(ev.slots[i].n)
				}
			}
			if present != ev.present || evBytes != ev.bytes {
				fail("open event %d: %d slots (%d bytes) filled, counted %d (%d bytes)", ev.key, present, evBytes, ev.present, ev.bytes)
			}
			if ev.frags == 0 {
				fail("open event %d has no fragment", ev.key)
			}
			if ev.present >= b.want && !ev.held {
				fail("open event %d has all %d sources (%d absent) but was not emitted", ev.key, b.want, b.nsrc-b.want)
			}
		}
		if ev.held {
			openHeld++
			heldBy[ev.opener]++
		}
		if ev.held && !ev.suspect {
			fail("open event %d held but not counted suspect", ev.key)
		}
		if ev.suspect {
			suspects++
		}
		if ev.epoch > b.ident.epoch+1 || (ev.epoch == b.ident.epoch+1 && !ev.held) {
			fail("open event %d in epoch %d (current %d, held %v): only suspect events may be in the next epoch", ev.key, ev.epoch, b.ident.epoch, ev.held)
		}
		if (ev.asg != nil) != b.cfg.Assigned {
			fail("open event %d: assignment %v in assigned mode %v", ev.key, ev.asg != nil, b.cfg.Assigned)
		}
		if ev.asg != nil {
			asgEvents[ev.asg]++
		}
		open++
		openFrags += ev.frags
		bytes += ev.bytes
		prev = ev
	}
	if openHeld != b.heldSuspect || b.heldSuspect > b.cfg.MaxSuspectEvents {
		fail("%d open suspect events, counted %d (limit %d)", openHeld, b.heldSuspect, b.cfg.MaxSuspectEvents)
	}
	for i, n := range b.ident.heldBy {
		if n != heldBy[int32(i)] || n > max(1, b.cfg.MaxSuspectEvents/4) {
			fail("source %d holds %d suspect events, counted %d (limit %d)", b.ids[i], heldBy[int32(i)], n, max(1, b.cfg.MaxSuspectEvents/4))
		}
	}
	b.checkIdentityLocked(fail)
	b.checkAssignmentsLocked(fail, asgEvents)
	if prev != b.tail {
		fail("open list: tail is not the last event")
	}
	inTable := 0
	for _, e := range b.table.slots {
		if e != nil {
			inTable++
		}
	}
	if inTable != open {
		fail("%d events in the table, %d in the open list", inTable, open)
	}

	readyFrags := 0
	for _, ev := range b.ready {
		if ev.open || ev.held {
			fail("ready event %d still marked open (%v) or held (%v)", ev.key, ev.open, ev.held)
		}
		if ev.asg != nil {
			asgEvents[ev.asg]++
		}
		readyFrags += ev.frags
		if ev.suspect {
			suspects++
		}
		bytes += ev.bytes
	}
	if b.moved != b.taken+uint64(len(b.ready)) {
		fail("moved %d != taken %d + ready %d", b.moved, b.taken, len(b.ready))
	}
	assembling := b.taken - l.EventsBuilt
	if uint64(b.held) != uint64(open+len(b.ready))+assembling {
		fail("held %d != open %d + ready %d + assembling %d", b.held, open, len(b.ready), assembling)
	}
	if suspects > b.suspectHeld || b.suspectHeld > b.cfg.MaxSuspectEvents || b.held-b.suspectHeld > max(b.cfg.MaxOpenEvents, 1) {
		fail("%d suspect events open or ready, counted %d (limit %d), held %d (limit %d normal)", suspects, b.suspectHeld, b.cfg.MaxSuspectEvents, b.held, b.cfg.MaxOpenEvents)
	}
	if b.held > max(b.cfg.MaxOpenEvents+b.cfg.MaxSuspectEvents, 1) {
		fail("held %d events over the limit %d + %d suspect", b.held, b.cfg.MaxOpenEvents, b.cfg.MaxSuspectEvents)
	}
	if bytes > b.heldB || b.heldB < 0 {
		fail("held bytes %d below the open and ready events' %d", b.heldB, bytes)
	}
	if uint64(openFrags+readyFrags) > l.FragmentsOpen {
		fail("open and ready events hold %d fragments, ledger says %d open", openFrags+readyFrags, l.FragmentsOpen)
	}
	if l.EventsBuilt != l.EventsComplete+l.EventsIncomplete {
		fail("built %d != complete %d + incomplete %d", l.EventsBuilt, l.EventsComplete, l.EventsIncomplete)
	}
}

// checkIdentityLocked verifies the event-identity state: the epoch counts,
// no quorum of votes left unresolved, suspect discards split by source,
// the late window's bounds.
func (b *Builder) checkIdentityLocked(fail func(string, ...any)) {
	d := &b.ident
	in, votes := 0, 0
	for i, s := range d.src {
		e := s.ep
		switch {
		case e == noEpoch:
		case e == d.epoch:
			in++
		case e == d.epoch+1:
			votes++
		case e > d.epoch:
			fail("source %d in epoch %d, past the current %d + 1", b.ids[i], e, d.epoch)
		}
	}
	if in != d.inEpoch || votes != d.votes {
		fail("%d sources in epoch %d and %d voting for the next, counted %d and %d", in, d.epoch, votes, d.inEpoch, d.votes)
	}
	if d.votes >= d.quorum {
		fail("%d votes for a counter reset, quorum %d, and no resync", d.votes, d.quorum)
	}
	for i, noted := range d.resetNoted {
		if noted && d.resetsBy[i] == 0 {
			fail("source %d: its reset noted and not counted", b.ids[i])
		}
	}
	var late uint64
	for _, v := range b.lateBy {
		late += v
	}
	if late != b.disc[rLate] {
		fail("late discards by source sum to %d, counted %d", late, b.disc[rLate])
	}
	var sum uint64
	for _, v := range d.suspectBy {
		sum += v
	}
	if sum != b.disc[rSuspect] {
		fail("suspect discards by source sum to %d, counted %d", sum, b.disc[rSuspect])
	}
	w := &b.emitted
	if w.mLen > w.n || w.n > len(w.ring) {
		fail("late window: %d edge keys, %d keys, room for %d", w.mLen, w.n, len(w.ring))
	}
}

// checkAssignmentsLocked verifies the assigned mode's index: spans sorted,
// disjoint and of live assignments, id counts, emitted bits, and events
// not yet delivered (at least those open or ready, counted in events).
func (b *Builder) checkAssignmentsLocked(fail func(string, ...any), events map[*assignment]int) {
	s := &b.asg
	ids := 0
	for _, a := range s.live {
		ids += a.n
		set := 0
		for _, w := range a.bits {
			set += bits.OnesCount64(w)
		}
		if set != a.emitted || a.emitted > a.n {
			fail("assignment %d: %d ids emitted, counted %d of %d", a.id, set, a.emitted, a.n)
		}
		if a.done != "" {
			fail("assignment %d is done (%s) but still live", a.id, a.done)
		}
	}
	if ids != s.ids {
		fail("live assignments hold %d ids, counted %d", ids, s.ids)
	}
	for i, sp := range s.spans {
		if sp.first > sp.last || s.live[sp.a.id] != sp.a || (i > 0 && sp.first <= s.spans[i-1].last) {
			fail("assignment span %d..%d (assignment %d) out of order, overlapping or not live", sp.first, sp.last, sp.a.id)
		}
	}
	for a, n := range events {
		if a.pending < n {
			fail("assignment %d: %d events open or ready, %d pending", a.id, n, a.pending)
		}
	}
}
