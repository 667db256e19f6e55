package builder

import "github.com/sluice-daq/sluice/internal/invariants"

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
	open, openFrags := 0, 0
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
			if ev.present >= b.nsrc {
				fail("open event %d has all %d sources but was not emitted", ev.key, b.nsrc)
			}
		}
		open++
		openFrags += ev.frags
		bytes += ev.bytes
		prev = ev
	}
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
		if ev.open {
			fail("ready event %d still marked open", ev.key)
		}
		readyFrags += ev.frags
		bytes += ev.bytes
	}
	if b.moved != b.taken+uint64(len(b.ready)) {
		fail("moved %d != taken %d + ready %d", b.moved, b.taken, len(b.ready))
	}
	assembling := b.taken - l.EventsBuilt
	if uint64(b.held) != uint64(open+len(b.ready))+assembling {
		fail("held %d != open %d + ready %d + assembling %d", b.held, open, len(b.ready), assembling)
	}
	if b.held > max(b.cfg.MaxOpenEvents, 1) {
		fail("held %d events over the limit %d", b.held, b.cfg.MaxOpenEvents)
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
