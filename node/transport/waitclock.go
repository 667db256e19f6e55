package transport

import (
	"sync/atomic"
	"time"
)

// waitClock measures the wall-clock time during which at least one of an
// input's readers (its TCP connections, its ring reader, ...) was inside
// Sink.AddPacket: the union of their waits, not their sum, so that eight
// connections blocked together for a second count one second and the
// total never exceeds the time the input has run. (A sum grows with the
// number of connections: a backpressure fraction of an interval computed
// from it read 300 % with four connections.)
//
// state is one word so that a transition and its timestamp change in one
// compare-and-swap: the number of readers inside (high waitDepthBits bits)
// and, while that is not 0, the microsecond the first of them entered (low
// bits, since clockEpoch, modulo 2^44: one busy period may last up to 203
// days). Reads never report less than an earlier read (reported), so the
// total is a counter.
type waitClock struct {
	state    atomic.Uint64
	doneUs   atomic.Uint64 // busy periods that ended
	reported atomic.Uint64 // the largest total read so far
}

const (
	waitDepthBits = 20 // more readers than TCP's max_connections allows
	waitTimeBits  = 64 - waitDepthBits
	waitTimeMask  = 1<<waitTimeBits - 1
	waitOne       = 1 << waitTimeBits // one reader, in state
)

var clockEpoch = time.Now()

// clockUs is the monotonic clock in microseconds since clockEpoch.
func clockUs() uint64 { return uint64(time.Since(clockEpoch) / time.Microsecond) }

// enter: a reader calls the sink; now is clockUs before the call.
func (w *waitClock) enter(now uint64) {
	for {
		s := w.state.Load()
		next := s + waitOne
		if s>>waitTimeBits == 0 {
			next = waitOne | now&waitTimeMask
		}
		if w.state.CompareAndSwap(s, next) {
			return
		}
	}
}

// leave: the sink returned to a reader; now is clockUs after the call. The
// last reader out adds the busy period to doneUs.
func (w *waitClock) leave(now uint64) {
	for {
		s := w.state.Load()
		if s>>waitTimeBits != 1 {
			if w.state.CompareAndSwap(s, s-waitOne) {
				return
			}
			continue
		}
		if w.state.CompareAndSwap(s, 0) {
			w.doneUs.Add((now - s) & waitTimeMask)
			return
		}
	}
}

// total is the busy time so far, in microseconds, the period going on
// included (an input stuck in its sink shows the wait growing). doneUs is
// read before state, so a period counted in it is never also counted as
// going on; a period that ends between the two reads is missed by this
// read only, which reported covers.
func (w *waitClock) total() uint64 {
	t := w.doneUs.Load()
	if s := w.state.Load(); s>>waitTimeBits != 0 {
		t += (clockUs() - s) & waitTimeMask // clockUs after the load: not before the period began
	}
	for {
		r := w.reported.Load()
		if t <= r {
			return r
		}
		if w.reported.CompareAndSwap(r, t) {
			return t
		}
	}
}
