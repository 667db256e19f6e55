package peertest

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/peer"
)

// testNoLeaks: after transports that exchanged messages are closed (one
// while the receiver still held a buffer), no goroutine, file descriptor or
// transport resource is left.
func (f *Factory) testNoLeaks(t *testing.T) {
	runtime.GC()
	g0, fd0 := runtime.NumGoroutine(), fds()
	func() {
		ta, tb := f.open(t, Config("a")), f.open(t, Config("b"))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		a, err := ta.Connect(ctx, tb.Addr())
		if err != nil {
			t.Fatal(err)
		}
		b, err := tb.Accept(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s := newSlots(t, ta, 2, 1<<20)
		for i := uint64(0); i < 10; i++ {
			if err := s.send(ctx, a, i, 1<<20); err != nil {
				t.Fatal(err)
			}
			if err := b.SendControl(ctx, 3, nil); err != nil {
				t.Fatal(err)
			}
		}
		var held peer.Buffer
		for i := 0; i < 10; i++ {
			m := recv(t, b, 10*time.Second)
			if i == 9 {
				held = m.Data
			} else {
				m.Data.Release()
			}
		}
		s.close(t)
		closeAll(t, ta, tb)
		_ = held.Bytes()[0] // still readable after Close
		held.Release()
	}()
	if !eventually(5*time.Second, func() bool { return runtime.NumGoroutine() <= g0 }) {
		t.Errorf("goroutines: %d before, %d after closing\n%s", g0, runtime.NumGoroutine(), goroutines())
	}
	if !eventually(5*time.Second, func() bool { return fds() <= fd0 }) {
		t.Errorf("file descriptors: %d before, %d after closing", fd0, fds())
	}
	if f.Resources != nil {
		if !eventually(5*time.Second, func() bool {
			for _, v := range f.Resources() {
				if v != 0 {
					return false
				}
			}
			return true
		}) {
			t.Errorf("transport resources left: %v", f.Resources())
		}
	}
}
