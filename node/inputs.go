package node

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sluice-daq/sluice/node/transport"
)

// tracker follows one input's counters to tell how long it has been idle.
type tracker struct {
	in       transport.Input
	emulated bool // fed by an embedded emulator
	mu       sync.Mutex
	packets  uint64
	activity time.Time
	done     bool
}

func newTracker(in transport.Input) *tracker { return &tracker{in: in, activity: time.Now()} }

// status reads the input's counters; a change of the packet count since the
// last call is activity.
func (t *tracker) status(now time.Time) InputStatus {
	st := t.in.Stats()
	t.mu.Lock()
	defer t.mu.Unlock()
	if st.Packets != t.packets {
		t.packets, t.activity = st.Packets, now
	}
	s := InputStatus{Packets: st.Packets, Bytes: st.Bytes, IdleSeconds: now.Sub(t.activity).Seconds(), Done: t.done,
		Open: st.Open, Refused: st.Refused, AcceptErrors: st.AcceptErrors, ConnectionsClosed: st.Closed,
		ConnectionsByVersion: st.ConnectionsByVersion,
		StreamsExpected:      st.ExpectStreams, StreamsEnded: st.Streams, Flagged: st.Flagged,
		StreamsLost:         st.StreamsLost,
		BackpressureSeconds: float64(st.SinkWaitNs) / 1e9}
	if l, ok := t.in.(transport.Listener); ok {
		s.Address = l.ListenAddr()
	}
	return s
}

func (t *tracker) setDone() {
	t.mu.Lock()
	t.done = true
	t.mu.Unlock()
}

// losses are the packets the input received and did not hand on, by
// reason (those that occurred), plus UDP datagrams declared lost ("lost",
// 0 included, so that metric exists before the first loss).
func (t *tracker) losses() map[string]uint64 {
	st := t.in.Stats()
	out := make(map[string]uint64, len(st.Discarded)+1)
	for k, v := range st.Discarded {
		out[k.String()] = v
	}
	out["lost"] = st.Lost
	return out
}

// runningInputs tracks the input and emulator goroutines of a run.
type runningInputs struct {
	trackers  []*tracker
	inputs    sync.WaitGroup
	emulators sync.WaitGroup
	finished  chan struct{} // closed when every input is finite and done
}

// startInputs runs each emulator (on emuCtx) and each input (on inCtx)
// feeding sink. An input (or emulator) that fails is reported and counts
// as ended, so that a run whose inputs all ended drains.
func (n *Node) startInputs(inCtx, emuCtx context.Context, parts *Parts, sink transport.Sink) *runningInputs {
	r := &runningInputs{finished: make(chan struct{})}
	var pending sync.WaitGroup // finite inputs (and their emulators) not done yet
	finite := len(parts.Inputs) > 0
	for i, in := range parts.Inputs {
		uri := n.cfg.Inputs[i].URI
		isFinite := i < len(parts.Finite) && parts.Finite[i]
		finite = finite && isFinite
		var emu func(context.Context) error
		if i < len(parts.Emulators) {
			emu = parts.Emulators[i]
		}
		if emu != nil {
			if isFinite {
				pending.Add(1)
			}
			r.emulators.Go(func() {
				if isFinite {
					defer pending.Done()
				}
				if err := emu(emuCtx); err != nil && !errors.Is(err, context.Canceled) {
					n.fail(inputError{uri: uri, what: "emulator", err: err})
				}
				n.log.Info("emulator ended", "input", uri)
			})
		}
		if isFinite && emu == nil {
			pending.Add(1)
		}
		t := newTracker(in)
		t.emulated = emu != nil
		r.trackers = append(r.trackers, t)
		r.inputs.Go(func() {
			if isFinite && emu == nil {
				defer pending.Done()
			}
			defer t.setDone()
			if err := in.Run(inCtx, sink); err != nil && !errors.Is(err, context.Canceled) {
				n.fail(inputError{uri: uri, what: "input", err: err})
			}
			n.log.Info("input ended", "input", uri)
		})
	}
	if finite {
		go func() {
			pending.Wait()
			close(r.finished)
		}()
	}
	return r
}

type inputError struct {
	uri, what string
	err       error
}

func (e inputError) Error() string { return e.what + " " + e.uri + ": " + e.err.Error() }
func (e inputError) Unwrap() error { return e.err }

// allIdle reports whether every input has received nothing for at least d.
func (r *runningInputs) allIdle(d time.Duration) bool {
	now := time.Now()
	for _, t := range r.trackers {
		if st := t.status(now); !st.Done && time.Duration(st.IdleSeconds*float64(time.Second)) < d {
			return false
		}
	}
	return true
}

// settleIdle is how long every input must have been idle, once the
// emulators stopped, before the inputs are closed in a drain.
const (
	settleIdle  = 250 * time.Millisecond
	settleLimit = 10 * time.Second
)

// settle waits, during a drain, until the inputs fed by the (now stopped)
// embedded emulators have taken what was in flight: each done or idle for
// settleIdle, for at most settleLimit. Inputs fed from outside are closed
// at once: their senders see the node stop.
func (r *runningInputs) settle(ctx context.Context) {
	done := make(chan struct{})
	go func() { r.inputs.Wait(); close(done) }()
	limit := time.NewTimer(settleLimit)
	defer limit.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-limit.C:
			return
		case <-tick.C:
			now, settled := time.Now(), true
			for _, t := range r.trackers {
				st := t.status(now)
				settled = settled && (!t.emulated || st.Done || st.IdleSeconds >= settleIdle.Seconds())
			}
			if settled {
				return
			}
		}
	}
}
