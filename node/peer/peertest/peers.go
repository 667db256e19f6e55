package peertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/peer"
)

// testManyPeers: 64 peers connect to one node and exchange messages with it
// at once; then all say goodbye.
func (f *Factory) testManyPeers(t *testing.T) {
	const n = 64
	// 65 transports in one process, each with its own progress loop: on
	// a loaded machine (two cores at load 35, the race detector) UCX's
	// hellos took more than the default 5 s and heartbeats more than a
	// 2 s peer timeout; what this test checks is that every peer gets
	// through, not how fast.
	small := func(node string) peer.Config {
		c := Config(node)
		c.PoolBytes, c.MaxData = 2<<20, 1<<20
		c.HandshakeTimeout, c.PeerTimeout = slack*30*time.Second, slack*20*time.Second
		return c
	}
	srv := f.open(t, small("server"))
	defer closeAll(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), slack*60*time.Second)
	defer cancel()
	clients := make([]peer.Transport, n)
	defer func() {
		for _, tr := range clients {
			if tr != nil {
				tr.Close()
			}
		}
	}()
	conns := make([]peer.Conn, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr, err := peer.Open(f.Name, small(fmt.Sprintf("client-%02d", i)))
			if err != nil {
				errs <- err
				return
			}
			clients[i] = tr
			c, err := tr.Connect(ctx, srv.Addr())
			if err != nil {
				errs <- err
				return
			}
			conns[i] = c
			s := newSlots(t, tr, 1, 1024)
			if err := c.SendControl(ctx, uint16(i), hdr(uint64(i))); err != nil {
				errs <- err
			}
			if err := s.send(ctx, c, uint64(i), 1024); err != nil {
				errs <- err
			}
			s.close(t)
		}()
	}
	seen := map[string]bool{}
	var accepted []peer.Conn
	for len(accepted) < n {
		c, err := srv.Accept(ctx)
		if err != nil {
			var failed []string
			for len(errs) > 0 {
				failed = append(failed, (<-errs).Error())
			}
			t.Fatalf("accepted %d of %d: %v; peers failed: %q; server: %s", len(accepted), n, err, failed, describe(srv.Stats()))
		}
		if seen[c.Node()] {
			t.Fatalf("node %q accepted twice", c.Node())
		}
		seen[c.Node()] = true
		accepted = append(accepted, c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if s := srv.Stats(); s.Open != n || s.Accepted != n {
		t.Fatalf("server: %d open, %d accepted, want %d; %s", s.Open, s.Accepted, n, describe(s))
	}
	for _, c := range accepted {
		var i int
		fmt.Sscanf(c.Node(), "client-%d", &i)
		for got := 0; got < 2; got++ {
			m := recv(t, c, 10*time.Second)
			switch m.Kind {
			case peer.KindControl:
				if m.Type != uint16(i) || seqOf(t, m.Body) != uint64(i) {
					t.Fatalf("%s: control %d/%d", c.Node(), m.Type, seqOf(t, m.Body))
				}
			case peer.KindData:
				if seqOf(t, m.Header) != uint64(i) {
					t.Fatalf("%s: data %d", c.Node(), seqOf(t, m.Header))
				}
				checkFill(t, m.Data.Bytes(), uint64(i))
				m.Data.Release()
			}
		}
		// The server answers every peer.
		if err := c.SendControl(ctx, 99, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range conns {
		if m := recv(t, c, 10*time.Second); m.Type != 99 {
			t.Fatalf("answer of type %d", m.Type)
		}
	}
	for _, tr := range clients {
		tr.Close()
	}
	for _, c := range accepted {
		if err := waitDone(t, c, 10*time.Second); !errors.Is(err, peer.ErrPeerClosed) {
			t.Fatalf("%s after its close: %v", c.Node(), err)
		}
		c.Close()
	}
	if s := srv.Stats(); s.Open != 0 || len(s.Lost) != 0 {
		t.Fatalf("server after all peers left: %s", describe(s))
	}
}

// testRefused: a peer of another farm, with a wrong token or our own node
// id is refused and counted on both sides; a full accept queue refuses too.
func (f *Factory) testRefused(t *testing.T) {
	cs := Config("server")
	cs.AcceptQueue = 1
	srv := f.open(t, cs)
	defer closeAll(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cases := []struct {
		name, reason string
		cfg          func(*peer.Config)
	}{
		{"farm", peer.RefusedFarm, func(c *peer.Config) { c.Farm = "other-farm" }},
		{"token", peer.RefusedToken, func(c *peer.Config) { c.Token = "wrong" }},
		{"node", peer.RefusedNode, func(c *peer.Config) { c.Node = "server" }},
	}
	for _, c := range cases {
		cfg := Config("client-" + c.name)
		c.cfg(&cfg)
		cl := f.open(t, cfg)
		_, err := cl.Connect(ctx, srv.Addr())
		if !errors.Is(err, peer.ErrRefused) {
			t.Fatalf("%s: connect gave %v, want ErrRefused", c.name, err)
		}
		if got := cl.Stats().Refused[c.reason]; got != 1 {
			t.Errorf("%s: client counted %v", c.name, cl.Stats().Refused)
		}
		closeAll(t, cl)
		if !eventually(5*time.Second, func() bool { return srv.Stats().Refused[c.reason] == 1 }) {
			t.Errorf("%s: server counted %v", c.name, srv.Stats().Refused)
		}
	}
	// AcceptQueue 1: the first waits for Accept, the second is refused.
	c1, c2 := f.open(t, Config("q1")), f.open(t, Config("q2"))
	defer closeAll(t, c1, c2)
	if _, err := c1.Connect(ctx, srv.Addr()); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Connect(ctx, srv.Addr()); !errors.Is(err, peer.ErrRefused) {
		t.Fatalf("second peer with a full accept queue: %v", err)
	}
	if srv.Stats().Refused[peer.RefusedAcceptQueue] != 1 {
		t.Errorf("server counted %v", srv.Stats().Refused)
	}
	a, err := srv.Accept(ctx)
	if err != nil || a.Node() != "q1" {
		t.Fatalf("accept: %v %v", a, err)
	}
	if s := srv.Stats(); s.Open != 1 || s.Accepted != 1 {
		t.Fatalf("server: %s", describe(s))
	}
}

// testRegions: a region with a send in flight refuses to close; a closed
// region cannot be sent from; a transport closed with regions open says so.
func (f *Factory) testRegions(t *testing.T) {
	cb := Config("b")
	cb.PoolBytes, cb.MaxData = 16<<20, 16<<20
	ta := f.open(t, Config("a"))
	tb := f.open(t, cb)
	defer closeAll(t, tb)
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
	r, err := ta.AllocRegion(32 << 20)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	cb2 := func(err error) { done <- err }
	// The first message fills b's pool (b holds it); the second cannot be
	// received and stays in flight.
	if err := a.SendData(ctx, nil, r.Slice(0, 16<<20), cb2); err != nil {
		t.Fatal(err)
	}
	held := recv(t, b, 10*time.Second)
	if err := a.SendData(ctx, nil, r.Slice(16<<20, 16<<20), cb2); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := r.Close(); !errors.Is(err, peer.ErrRegionBusy) {
		t.Fatalf("closing a region with a send in flight: %v", err)
	}
	held.Data.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	m := recv(t, b, 10*time.Second)
	m.Data.Release()
	if err := r.Close(); err != nil {
		t.Fatalf("closing an idle region: %v", err)
	}
	if err := a.SendData(ctx, nil, peer.Slice{Region: r, N: 1}, cb2); !errors.Is(err, peer.ErrNotRegistered) {
		t.Fatalf("send from a closed region: %v", err)
	}
	if _, err := ta.AllocRegion(4096); err != nil {
		t.Fatal(err)
	}
	if s := ta.Stats(); s.Regions != 1 {
		t.Fatalf("regions open: %d", s.Regions)
	}
	if err := ta.Close(); !errors.Is(err, peer.ErrRegionOpen) {
		t.Fatalf("closing a transport with a region open: %v", err)
	}
	if s := ta.Stats(); s.Regions != 0 {
		t.Fatalf("regions open after Close: %d", s.Regions)
	}
}

// testUnreachable: a connect to a port nothing listens on fails at once
// (within a second, even loaded) with ErrUnreachable, naming the address,
// and counts no peer lost: it is not a peer that went away.
func (f *Factory) testUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cl := f.open(t, Config("client-unreachable"))
	defer closeAll(t, cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t0 := time.Now()
	_, err = cl.Connect(ctx, addr)
	took := time.Since(t0)
	if !errors.Is(err, peer.ErrUnreachable) || errors.Is(err, peer.ErrPeerLost) {
		t.Fatalf("connect to closed port %s: %v, want ErrUnreachable", addr, err)
	}
	if !strings.Contains(err.Error(), addr) {
		t.Errorf("error %q does not name the address %s", err, addr)
	}
	if took > time.Second {
		t.Errorf("connect to a closed port took %v, want < 1s", took)
	}
	if s := cl.Stats(); s.Open != 0 || len(s.Lost) != 0 {
		t.Errorf("after a refused connect: %s", describe(s))
	}
}
