package peertest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/peer"
)

// testBackpressure: a receiver that takes nothing throttles its sender;
// its pool never holds more than its size; once it drains, everything
// arrives in order.
func (f *Factory) testBackpressure(t *testing.T) {
	const msg, total = 1 << 20, 96
	cb := Config("b")
	cb.PoolBytes, cb.MaxData = 4*msg, msg
	ca := Config("a")
	ca.SendQueue = 4
	ta, tb, a, b := f.pair(t, ca, cb)
	ctx := context.Background()
	s := newSlots(t, ta, 8, msg)
	var returned atomic.Int64
	sendErr := make(chan error, 1)
	go func() {
		for i := uint64(0); i < total; i++ {
			if err := s.send(ctx, a, i, msg); err != nil {
				sendErr <- err
				return
			}
			returned.Add(1)
		}
		sendErr <- nil
	}()
	// Wait until the sender stops making progress.
	var last int64 = -1
	for i := 0; i < 100; i++ {
		time.Sleep(50 * time.Millisecond)
		n := returned.Load()
		if n == last {
			break
		}
		last = n
	}
	sb := tb.Stats()
	if sb.PoolHeld > sb.PoolBytes {
		t.Fatalf("receiver pool holds %d of %d bytes", sb.PoolHeld, sb.PoolBytes)
	}
	if last >= total {
		t.Fatalf("sender sent all %d MiB into a receiver that took nothing (pool of 4 MiB)", total)
	}
	t.Logf("throttled after %d of %d messages; receiver pool %d/%d", last, total, sb.PoolHeld, sb.PoolBytes)
	for i := uint64(0); i < total; i++ {
		m := recv(t, b, 20*time.Second)
		if seqOf(t, m.Header) != i {
			t.Fatalf("message %d where %d was due", seqOf(t, m.Header), i)
		}
		checkFill(t, m.Data.Bytes(), i)
		m.Data.Release()
		if h := tb.Stats().PoolHeld; h > 4*msg {
			t.Fatalf("pool holds %d bytes", h)
		}
	}
	if err := <-sendErr; err != nil {
		t.Fatal(err)
	}
	s.close(t)
	if w := tb.Stats().PoolWaits; w == 0 {
		t.Errorf("no data message waited for pool room")
	}
}

// testControlWindow: a peer that does not Recv stops the sender of control
// messages after its window; Recv gives credits back.
func (f *Factory) testControlWindow(t *testing.T) {
	cb := Config("b")
	cb.ControlWindow = 8
	_, _, a, b := f.pair(t, Config("a"), cb)
	ctx := context.Background()
	for i := 0; i < 8; i++ {
		if err := a.SendControl(ctx, 1, hdr(uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := a.SendControl(short, 1, hdr(8)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("9th control message into a window of 8: %v", err)
	}
	for i := 0; i < 8; i++ {
		if m := recv(t, b, 5*time.Second); seqOf(t, m.Body) != uint64(i) {
			t.Fatalf("got %d", seqOf(t, m.Body))
		}
	}
	for i := 8; i < 100; i++ {
		if err := a.SendControl(ctx, 1, hdr(uint64(i))); err != nil {
			t.Fatal(err)
		}
		if m := recv(t, b, 5*time.Second); seqOf(t, m.Body) != uint64(i) {
			t.Fatalf("got %d", seqOf(t, m.Body))
		}
	}
}

// testIdle: heartbeats keep an idle Conn up well past the peer timeout.
func (f *Factory) testIdle(t *testing.T) {
	ca, cb := Config("a"), Config("b")
	for _, c := range []*peer.Config{&ca, &cb} {
		c.Heartbeat, c.PeerTimeout = 25*time.Millisecond, slack*500*time.Millisecond
	}
	_, _, a, b := f.pair(t, ca, cb)
	time.Sleep(4 * ca.PeerTimeout) // four timeouts

	if a.Err() != nil || b.Err() != nil {
		t.Fatalf("idle conns ended: %v / %v", a.Err(), b.Err())
	}
	if err := a.SendControl(context.Background(), 5, nil); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, b, 5*time.Second); m.Type != 5 {
		t.Fatalf("type %d", m.Type)
	}
}

// testCloseDelivers: everything sent before a Close arrives, then the peer
// sees ErrPeerClosed; nothing counts as lost.
func (f *Factory) testCloseDelivers(t *testing.T) {
	ta, tb, a, b := f.pair(t, Config("a"), Config("b"))
	ctx := context.Background()
	s := newSlots(t, ta, 4, 64<<10)
	const n = 50
	for i := uint64(0); i < n; i++ {
		if err := s.send(ctx, a, i, 64<<10); err != nil {
			t.Fatal(err)
		}
		if err := a.SendControl(ctx, 2, hdr(i)); err != nil {
			t.Fatal(err)
		}
	}
	s.close(t) // every send completed
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(a.Err(), peer.ErrClosed) {
		t.Fatalf("closer's Err: %v", a.Err())
	}
	var data, ctl uint64
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		m, err := b.Recv(ctx)
		cancel()
		if err != nil {
			if !errors.Is(err, peer.ErrPeerClosed) {
				t.Fatalf("after %d data, %d control: %v", data, ctl, err)
			}
			break
		}
		if m.Kind == peer.KindData {
			if seqOf(t, m.Header) != data {
				t.Fatalf("data %d where %d was due", seqOf(t, m.Header), data)
			}
			m.Data.Release()
			data++
		} else {
			ctl++
		}
	}
	if data != n || ctl != n {
		t.Fatalf("received %d data, %d control before the goodbye, want %d each", data, ctl, n)
	}
	// The closed connections leave the transports' open count (b's too,
	// before b.Close: the goodbye ended it) when their worker has handled
	// the goodbye, which a loaded machine delays.
	for _, tr := range []peer.Transport{ta, tb} {
		eventually(10*time.Second, func() bool { return tr.Stats().Open == 0 })
		if st := tr.Stats(); len(st.Lost) != 0 || st.Open != 0 {
			t.Errorf("%s: %s", tr.Addr(), describe(st))
		}
	}
	b.Close()
}
