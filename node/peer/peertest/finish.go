package peertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/peer"
)

// testFinish: Finish waits until the receiver has every data message the
// Conn sent, however far behind it is: it does not return while the
// receiver, whose pool holds a fraction of them, takes none; once the
// receiver reads, every message arrives in order, Finish returns nil and
// the receiver sees the goodbye after the last one. Nothing is counted
// lost on either side.
func (f *Factory) testFinish(t *testing.T) {
	const msg, total = 64 << 10, 400 // 25 MiB through a 1 MiB pool
	cb := Config("b")
	cb.PoolBytes, cb.MaxData = 1<<20, msg
	ta, tb, a, b := f.pair(t, Config("a"), cb)
	ctx := context.Background()
	s := newSlots(t, ta, 16, msg)
	finished := make(chan error, 1)
	go func() {
		for i := uint64(0); i < total; i++ {
			if err := s.send(ctx, a, i, msg); err != nil {
				finished <- err
				return
			}
		}
		finished <- a.Finish(ctx)
	}()
	// The receiver takes nothing: whatever the sockets and the pool hold,
	// most messages cannot have arrived, so Finish must still wait.
	select {
	case err := <-finished:
		t.Fatalf("Finish returned %v while the receiver had taken none of %d messages (pool of %d)", err, total, cb.PoolBytes)
	case <-time.After(300 * time.Millisecond):
	}
	for i := uint64(0); i < total; i++ {
		m := recv(t, b, 20*time.Second)
		if m.Kind != peer.KindData || seqOf(t, m.Header) != i {
			t.Fatalf("message %d: %v where data %d was due", i, m.Kind, i)
		}
		checkFill(t, m.Data.Bytes(), i)
		m.Data.Release()
	}
	select {
	case err := <-finished:
		if err != nil {
			t.Fatalf("Finish: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Finish still waiting 20 s after the receiver took every message")
	}
	if !errors.Is(a.Err(), peer.ErrClosed) {
		t.Fatalf("finished Conn's Err: %v", a.Err())
	}
	if _, err := drain(t, b); !errors.Is(err, peer.ErrPeerClosed) {
		t.Fatalf("receiver after the last message: %v, want ErrPeerClosed", err)
	}
	s.close(t)
	for _, tr := range []peer.Transport{ta, tb} {
		if !eventually(5*time.Second, func() bool { return tr.Stats().Open == 0 }) {
			t.Errorf("%s: %s", tr.Addr(), describe(tr.Stats()))
		}
		if st := tr.Stats(); len(st.Lost) != 0 || st.DataTruncated != 0 {
			t.Errorf("%s: %s", tr.Addr(), describe(st))
		}
	}
	b.Close()
}

// testFinishPeerCloses: a receiver that closes its Conn instead of taking
// the last messages makes the sender fail (a send, or Finish: the goodbye
// was not confirmed); it neither waits forever nor reports success.
func (f *Factory) testFinishPeerCloses(t *testing.T) {
	const msg, total = 64 << 10, 64 // 16 fill the pool
	cb := Config("b")
	cb.PoolBytes, cb.MaxData = 1<<20, msg
	ta, tb, a, b := f.pair(t, Config("a"), cb)
	ctx := context.Background()
	s := newSlots(t, ta, 16, msg)
	finished := make(chan error, 1)
	go func() {
		for i := uint64(0); i < total; i++ {
			if err := s.send(ctx, a, i, msg); err != nil {
				finished <- fmt.Errorf("send %d: %w", i, err)
				return
			}
		}
		finished <- a.Finish(ctx)
	}()
	// Hold the pool full (16 messages complete, none being received: UCX
	// 1.13's tcp transport aborts the process when an endpoint closes
	// while a rendezvous transfer into it is under way), then close.
	m := recv(t, b, 20*time.Second)
	if !eventually(20*time.Second, func() bool { return tb.Stats().DataReceived == 16 }) {
		t.Fatalf("receiver: %s", describe(tb.Stats()))
	}
	b.Close()
	m.Data.Release()
	select {
	case err := <-finished:
		if err == nil {
			t.Fatal("Finish returned nil after the receiver closed with messages not taken")
		}
		t.Logf("sender: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("Finish still waiting 20 s after the receiver closed")
	}
	s.close(t)
}
