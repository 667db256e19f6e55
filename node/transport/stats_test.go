package transport_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/schemas"
)

// blockingSink holds every caller until n of them are inside, then for
// hold more, so that n readers wait together.
type blockingSink struct {
	n    int
	hold time.Duration
	mu   sync.Mutex
	in   int
	all  chan struct{}
}

func (s *blockingSink) AddPacket(_ context.Context, _ schemas.MFP, release func()) error {
	defer release()
	s.mu.Lock()
	s.in++
	if s.in == s.n {
		close(s.all)
	}
	s.mu.Unlock()
	<-s.all
	time.Sleep(s.hold)
	return nil
}

// The time an input waited for its sink is wall-clock time: four
// connections blocked together for 300 ms count at most the time the
// test took, not four times it (the sum made the backpressure warning
// say 400 %). It grows while the wait goes on and never goes back.
func TestSinkWaitIsWallTime(t *testing.T) {
	const readers, hold = 4, 300 * time.Millisecond
	p, _, err := schemas.DecodeMFP(schemas.AppendMFP(nil, 1, 7, 0, 0, [][]byte{[]byte("payload!")}, nil))
	if err != nil {
		t.Fatal(err)
	}
	var c transport.Counters
	sink := &blockingSink{n: readers, hold: hold, all: make(chan struct{})}
	start := time.Now()
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() {
			if err := c.Hand(context.Background(), sink, p, func() {}); err != nil {
				t.Error(err)
			}
		})
	}
	<-sink.all
	time.Sleep(hold / 2)
	during := c.Snapshot().SinkWaitNs
	wg.Wait()
	wall := time.Since(start)
	st := c.Snapshot()
	if st.Packets != readers {
		t.Fatalf("%d packets handed, want %d", st.Packets, readers)
	}
	got := time.Duration(st.SinkWaitNs)
	if got > wall || got < hold {
		t.Fatalf("sink wait %v with %d readers blocked together for %v; want %v .. %v (the wall time)", got, readers, hold, hold, wall)
	}
	if during == 0 || time.Duration(during) > got {
		t.Fatalf("sink wait while the readers waited: %v, after: %v", time.Duration(during), got)
	}
	if again := c.Snapshot().SinkWaitNs; again != st.SinkWaitNs {
		t.Fatalf("sink wait moved with nobody inside: %d then %d", st.SinkWaitNs, again)
	}
}

// Readers entering and leaving at random keep the total consistent: it
// never decreases between reads and ends at most the wall time.
func TestSinkWaitConcurrent(t *testing.T) {
	p, _, err := schemas.DecodeMFP(schemas.AppendMFP(nil, 1, 7, 0, 0, [][]byte{[]byte("payload!")}, nil))
	if err != nil {
		t.Fatal(err)
	}
	var c transport.Counters
	sink := sinkFunc(func() { time.Sleep(20 * time.Microsecond) })
	start := time.Now()
	stop := make(chan struct{})
	var readers, reader sync.WaitGroup
	for range 8 {
		readers.Go(func() {
			for range 300 {
				c.Hand(context.Background(), sink, p, func() {})
			}
		})
	}
	reader.Go(func() {
		var last uint64
		for {
			select {
			case <-stop:
				return
			default:
			}
			if v := c.Snapshot().SinkWaitNs; v < last {
				t.Errorf("sink wait went back from %d to %d", last, v)
				return
			} else {
				last = v
			}
		}
	})
	readers.Wait()
	close(stop)
	reader.Wait()
	if got, wall := time.Duration(c.Snapshot().SinkWaitNs), time.Since(start); got > wall || got == 0 {
		t.Fatalf("sink wait %v over a wall time of %v", got, wall)
	}
}

type sinkFunc func()

func (f sinkFunc) AddPacket(_ context.Context, _ schemas.MFP, release func()) error {
	f()
	release()
	return nil
}
