package shm

import "github.com/sluice-daq/sluice/internal/invariants"

// checkLocked verifies the reader's invariants in the invariants build (r.mu
// held): the ring's pointers in order (ack <= read <= write, read - ack <=
// the data size), the queue of handed-out records ending at strictly
// increasing positions past the ack pointer, its last ending at the read
// cursor, and the count of unreleased packets matching it.
func (r *Reader) checkLocked(where string) {
	if !invariants.Enabled || r.closed {
		return
	}
	m := &r.m
	ack, write, size := m.u64(offAck).Load(), m.u64(offWrite).Load(), uint64(len(m.data))
	fail := func(format string, args ...any) {
		invariants.Failf("readout ring reader", m.name+" after "+where+": "+format, args...)
	}
	if ack > r.read || r.read > write {
		fail("ack %d <= read %d <= write %d does not hold", ack, r.read, write)
	}
	if r.read-ack > size {
		fail("read %d is more than the data size %d past ack %d", r.read, size, ack)
	}
	out, prev := 0, ack
	for i := 0; i < r.n; i++ {
		e := r.pend[(r.head+i)%len(r.pend)]
		if e.end <= prev {
			fail("handed-out record %d ends at %d, not past %d", r.base+uint64(i), e.end, prev)
		}
		prev = e.end
		if !e.done {
			out++
		}
	}
	if r.n > 0 && prev != r.read {
		fail("the last handed-out record ends at %d, the read cursor is %d", prev, r.read)
	}
	if r.n > 0 && r.pend[r.head].done {
		fail("record %d is released but not acknowledged", r.base)
	}
	if out != r.out {
		fail("%d records unreleased in the queue, %d counted", out, r.out)
	}
}

// check verifies the writer's invariants in the invariants build: it never
// runs more than the data size ahead of the acknowledged pointer (no
// unacknowledged byte is overwritten) and records start on recordAlign.
func (wr *Writer) check(where string) {
	if !invariants.Enabled {
		return
	}
	m := &wr.m
	ack, size := m.u64(offAck).Load(), uint64(len(m.data))
	if ack > wr.w || wr.w-ack > size {
		invariants.Failf("readout ring writer", "%s after %s: write %d, ack %d, data size %d", m.name, where, wr.w, ack, size)
	}
	if wr.w%recordAlign != 0 {
		invariants.Failf("readout ring writer", "%s after %s: write pointer %d is not on a %d-byte record boundary", m.name, where, wr.w, recordAlign)
	}
}
