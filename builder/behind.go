package builder

import "time"

// Waiting for sources that are behind (event mode without Config.Assigned).
//
// Timeout is how long an event waits for its missing sources after its
// first fragment. That is the right bound for a source that is silent or
// lost a fragment, and the wrong one for a source that is still sending
// but runs behind the others: a readout board starved of CPU, started a
// second late, or sharing a busy link. Its fragments come, only later than
// the first source's; emitting the events at Timeout makes every one of
// them incomplete and every fragment of the slow source late, for as long
// as the skew lasts (the shipped farm-node recipe on a busy machine: 53-92 %
// incomplete). So an event past its Timeout waits on while one of its
// missing sources is behind it:
//
//   - in the event's epoch, with its latest id below the event's (it has
//     not passed the event: a source past it lost that fragment), and
//   - still sending: it placed a fragment within the last BehindWait.
//
// There is no cap in seconds. How far behind a source can fall in ids is
// bounded anyway: the sources ahead fill the builder's limits or their
// inputs' credit and are throttled, as a trigger is throttled by its
// slowest board; in time that distance is over the slow source's own rate,
// which a starved board makes many seconds. BehindWait is how long such a
// source may pause: a board starved of CPU on a busy machine stops for a
// second now and then (1.1 s seen at load 36 on 2 cores), and every event
// waiting for it would then go out at once. A source that pauses for
// longer is taken for stopped and the events go out incomplete, as before.
// Only the oldest open event is judged (the FIFO's head): events behind it
// wait with it. Suspect events never wait; one opened before the reference
// existed (the first boards of a run, before a quorum of sources started)
// waits once the reference exists and its id is near it.

// activity is what the emitter last saw of a source's fragment count, and
// when it saw it move.
type activity struct {
	n  uint64
	at time.Time
}

type behindState struct {
	seen    []activity // by source index
	sampled time.Time  // when seen was last brought up to date
	waiting bool       // the head waits for a source behind it (the emitter rechecks)
	events  uint64     // events that waited past Timeout (Ledger.EventsWaitedBehind)
}

// behindRecheck is how often the emitter looks again at an event waiting
// for a source behind it, and how often it samples the sources' activity:
// the error of "sent within BehindWait".
func (b *Builder) behindRecheck() time.Duration {
	return max(min(b.cfg.Timeout, b.cfg.BehindWait)/16, time.Millisecond)
}

// noteActivityLocked samples every source's fragment count, at most once
// per behindRecheck: a source whose count moved since the last sample was
// sending then. O(sources) per sample.
func (b *Builder) noteActivityLocked(now time.Time) {
	if b.isTS || b.cfg.Assigned || b.cfg.BehindWait < 0 {
		return
	}
	if now.Sub(b.behind.sampled) < b.behindRecheck() {
		return
	}
	b.behind.sampled = now
	for i := range b.behind.seen {
		if n := b.ident.src[i].n; n != b.behind.seen[i].n {
			b.behind.seen[i] = activity{n: n, at: now}
		}
	}
}

// waitBehindLocked reports whether ev, past its Timeout, waits on for a
// missing source that is behind it and still sending (see above).
func (b *Builder) waitBehindLocked(ev *event, now time.Time) bool {
	if b.isTS || b.cfg.Assigned || b.cfg.BehindWait < 0 || ev.held {
		return false
	}
	if ev.judge {
		// Opened before the reference existed (the first sources of a
		// run, the others starting later): it waits only once the
		// reference exists and is near it, when its judgment is to emit.
		if ev.epoch != b.ident.epoch {
			return false
		}
		if _, ok := b.referenceLocked(true); !ok || b.ident.far(ev.key) {
			return false
		}
	}
	b.noteActivityLocked(now)
	for s := range ev.slots {
		if ev.slots[s].state != 0 {
			continue
		}
		si := &b.ident.src[s]
		if si.ep == ev.epoch && si.last < ev.key && si.n > 0 && now.Sub(b.behind.seen[s].at) < b.cfg.BehindWait {
			b.behind.waiting = true
			if !ev.waited {
				ev.waited = true
				b.behind.events++
			}
			return true
		}
	}
	return false
}
