// Package peertest is the conformance suite of the peer transports: every
// transport's tests call Run (and Main from their TestMain, for the helper
// processes the suite kills and stops). It checks what package peer's doc
// promises: ordering, message sizes from 1 B to 64 MiB, many peers, the
// hello's refusals, backpressure with bounded memory, a peer SIGKILLed
// mid-transfer or SIGSTOPped, zero copies by sluice, and a clean close that
// leaks no goroutine, file descriptor or transport resource.
package peertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/peer"
)

// Factory describes the transport under test.
type Factory struct {
	// Name is the transport's registered name (peer.Open's).
	Name string
	// Resources, if not nil, reports the transport package's live
	// resources by name (endpoints, registrations, workers...): all must be
	// zero once every transport is closed.
	Resources func() map[string]int64
	// DeadWithin is how soon a SIGKILLed peer must surface as an error
	// (default 100ms; three times that under the race detector).
	DeadWithin time.Duration
}

// PoolMemory is implemented by transports that expose their receive
// pool's arena, so the suite can check that payloads are received in place.
type PoolMemory interface{ PoolMemory() []byte }

func (f *Factory) deadWithin() time.Duration {
	if f.DeadWithin > 0 {
		return f.DeadWithin * slack
	}
	return 100 * time.Millisecond * slack
}

// Config is the suite's base configuration: loopback, port 0, the given
// node id, farm "peertest" and its token, and a peer timeout of 2 s (the
// tests of silence set their own): `make test` runs every package at once
// on two cores, which can starve a process for longer than the default.
func Config(node string) peer.Config {
	return peer.Config{Node: node, Farm: "peertest", Token: "peertest-token", Listen: "127.0.0.1:0", PeerTimeout: 2 * time.Second}
}

func (f *Factory) open(t testing.TB, cfg peer.Config) peer.Transport {
	t.Helper()
	tr, err := peer.Open(f.Name, cfg)
	if err != nil {
		t.Fatalf("open %s %q: %v", f.Name, cfg.Node, err)
	}
	return tr
}

// pair opens two transports and connects a to b; it returns the Conns on
// both sides. Both transports are closed at the end of the test.
func (f *Factory) pair(t testing.TB, ca, cb peer.Config) (ta, tb peer.Transport, a, b peer.Conn) {
	t.Helper()
	ta, tb = f.open(t, ca), f.open(t, cb)
	t.Cleanup(func() { closeAll(t, ta, tb) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := ta.Connect(ctx, tb.Addr())
	if err != nil {
		t.Fatalf("connect %s -> %s: %v", ca.Node, cb.Node, err)
	}
	b, err = tb.Accept(ctx)
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	if a.Node() != cb.Node || b.Node() != ca.Node {
		t.Fatalf("node ids: a sees %q (want %q), b sees %q (want %q)", a.Node(), cb.Node, b.Node(), ca.Node)
	}
	if b.RemoteAddr() != ta.Addr() {
		t.Fatalf("b sees a's address %q, a listens at %q", b.RemoteAddr(), ta.Addr())
	}
	return ta, tb, a, b
}

func closeAll(t testing.TB, ts ...peer.Transport) {
	for _, tr := range ts {
		if err := tr.Close(); err != nil {
			t.Errorf("close %s: %v", tr.Addr(), err)
		}
	}
}

// Run runs the whole suite against f.
func Run(t *testing.T, f Factory) {
	t.Run("Ordering", f.testOrdering)
	t.Run("Sizes", f.testSizes)
	t.Run("Limits", f.testLimits)
	t.Run("ManyPeers", f.testManyPeers)
	t.Run("Refused", f.testRefused)
	t.Run("Unreachable", f.testUnreachable)
	t.Run("Regions", f.testRegions)
	t.Run("Backpressure", f.testBackpressure)
	t.Run("ControlWindow", f.testControlWindow)
	t.Run("Idle", f.testIdle)
	t.Run("CloseDelivers", f.testCloseDelivers)
	t.Run("Finish", f.testFinish)
	t.Run("FinishPeerCloses", f.testFinishPeerCloses)
	t.Run("KillSender", f.testKillSender)
	t.Run("KillReceiver", f.testKillReceiver)
	t.Run("Stop", f.testStop)
	t.Run("NoLeaks", f.testNoLeaks)
}

// recv is Recv with a deadline, failing the test on error.
func recv(t testing.TB, c peer.Conn, d time.Duration) peer.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	m, err := c.Recv(ctx)
	if err != nil {
		t.Fatalf("recv from %s: %v", c.Node(), err)
	}
	return m
}

// waitDone waits for the Conn to end and returns its error.
func waitDone(t testing.TB, c peer.Conn, d time.Duration) error {
	t.Helper()
	select {
	case <-c.Done():
		return c.Err()
	case <-time.After(d):
		t.Fatalf("conn to %s still up after %v", c.Node(), d)
		return nil
	}
}

// drain takes every message Recv still returns after the Conn ended,
// releasing buffers; it returns the final error.
func drain(t testing.TB, c peer.Conn) (n int, err error) {
	t.Helper()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m, err := c.Recv(ctx)
		cancel()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Recv hangs on an ended conn")
			}
			return n, err
		}
		if m.Data != nil {
			m.Data.Release()
		}
		n++
	}
}

// eventually polls cond for up to d.
func eventually(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fds counts this process's open file descriptors.
func fds() int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(es)
}

func goroutines() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var keep []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "node/peer") {
			keep = append(keep, g)
		}
	}
	return strings.Join(keep, "\n\n")
}

func describe(s peer.Stats) string {
	return fmt.Sprintf("open %d refused %v lost %v pool %d/%d regions %d copied %d truncated %d",
		s.Open, s.Refused, s.Lost, s.PoolHeld, s.PoolBytes, s.Regions, s.CopiedBytes, s.DataTruncated)
}
