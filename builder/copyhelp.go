package builder

import (
	"sync"
	"sync/atomic"
	"time"
)

// copyHelpers are the assembler's long-lived helpers: goroutines that take
// parts of the batch being assembled (copyJob) besides the emitter.
//
// They poll for a job on Go's timer instead of being woken when one is
// offered, because on these machines (2-core VMs) a goroutine made
// runnable by another one ran on the idle core only after ~100 µs at the
// median and often not before the waker blocked: a helper started per
// batch (`go`) began 2.3 ms after its batch at the median (`sluice bench
// --trace`), i.e. when the emitter had copied the batch alone, with the
// other core idle and the readout waiting for the ring space the batch
// held. A sleeping goroutine whose timer fires is run by its own P at once.
// Polling backs off from pollMin to pollMax, and after sleepAfter without
// a job a helper blocks until the next offer wakes it (the first batch
// after a pause is then copied as before: by whoever gets there).
type copyHelpers struct {
	job  atomic.Pointer[copyJob]
	wake chan struct{} // rouses helpers blocked after sleepAfter
	stop chan struct{}
	wg   sync.WaitGroup
}

// The helpers' polling: short first (a batch is assembled every few ms at
// full rate), at most pollMax, and no polling at all after sleepAfter idle.
const (
	pollMin    = 20 * time.Microsecond
	pollMax    = 200 * time.Microsecond
	sleepAfter = 50 * time.Millisecond
)

// startCopyHelpers starts n helpers (none for n < 1).
func startCopyHelpers(n int) *copyHelpers {
	h := &copyHelpers{wake: make(chan struct{}, max(n, 1)), stop: make(chan struct{})}
	for range n {
		h.wg.Go(h.loop)
	}
	return h
}

// offer makes j the job helpers take parts of.
func (h *copyHelpers) offer(j *copyJob) {
	h.job.Store(j)
	for range cap(h.wake) {
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
}

// withdraw clears j once all its parts are copied.
func (h *copyHelpers) withdraw(j *copyJob) { h.job.CompareAndSwap(j, nil) }

// close stops the helpers and waits for them.
func (h *copyHelpers) close() {
	close(h.stop)
	h.wg.Wait()
}

func (h *copyHelpers) loop() {
	var last *copyJob // the job this helper took parts of last (or found empty)
	step, idle := pollMin, time.Duration(0)
	for {
		select {
		case <-h.stop:
			return
		default:
		}
		if j := h.job.Load(); j != nil && j != last {
			last = j
			j.work()
			step, idle = pollMin, 0
			continue
		}
		if idle >= sleepAfter {
			select {
			case <-h.wake:
			case <-h.stop:
				return
			}
			step, idle = pollMin, 0
			continue
		}
		time.Sleep(step)
		idle += step
		step = min(2*step, pollMax)
	}
}
