package peertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/peer"
)

// testSizes: data messages from 1 B to 64 MiB arrive intact, each in place
// in a pool slot, with no copy by sluice; control messages from 0 B to
// MaxControl too.
func (f *Factory) testSizes(t *testing.T) {
	ta, tb, a, b := f.pair(t, Config("a"), Config("b"))
	ctx := context.Background()
	sizes := []int{1, 2, 7, 8, 100, 4095, 4096, 4097, 65536, 1 << 20, 8<<20 + 3, 64 << 20}
	r, err := ta.AllocRegion(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range sizes {
		sl := r.Slice(0, n)
		fill(sl.Bytes(), uint64(i))
		done := make(chan error, 1)
		if err := a.SendData(ctx, hdr(uint64(i)), sl, func(err error) { done <- err }); err != nil {
			t.Fatalf("send %d bytes: %v", n, err)
		}
		m := recv(t, b, 30*time.Second)
		if m.Kind != peer.KindData || seqOf(t, m.Header) != uint64(i) || len(m.Data.Bytes()) != n {
			t.Fatalf("sent %d bytes, got %v of %d bytes", n, m.Kind, len(m.Data.Bytes()))
		}
		checkFill(t, m.Data.Bytes(), uint64(i))
		checkInPool(t, tb, m.Data.Bytes())
		m.Data.Release()
		if err := <-done; err != nil {
			t.Fatalf("send %d bytes completed with %v", n, err)
		}
	}
	for _, n := range []int{0, 1, 1000, peer.MaxControl} {
		body := make([]byte, n)
		fill(body, uint64(n))
		if err := a.SendControl(ctx, 7, body); err != nil {
			t.Fatal(err)
		}
		m := recv(t, b, 5*time.Second)
		if m.Kind != peer.KindControl || m.Type != 7 || len(m.Body) != n {
			t.Fatalf("control of %d bytes: got %v type %d of %d bytes", n, m.Kind, m.Type, len(m.Body))
		}
		checkFill(t, m.Body, uint64(n))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tr := range []peer.Transport{ta, tb} {
		if s := tr.Stats(); s.CopiedBytes != 0 || s.PoolHeld != 0 {
			t.Errorf("%s: %s", tr.Addr(), describe(s))
		}
	}
}

// testLimits: oversized messages are refused before anything is sent.
func (f *Factory) testLimits(t *testing.T) {
	cb := Config("b")
	cb.MaxData, cb.PoolBytes = 1<<20, 4<<20
	ta, tb, a, b := f.pair(t, Config("a"), cb)
	ctx := context.Background()
	if err := a.SendControl(ctx, 1, make([]byte, peer.MaxControl+1)); !errors.Is(err, peer.ErrTooLarge) {
		t.Fatalf("control of MaxControl+1 bytes: %v", err)
	}
	r, err := ta.AllocRegion(2 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	never := func(error) { t.Error("done called for a refused send") }
	if err := a.SendData(ctx, make([]byte, peer.MaxHeader+1), r.Slice(0, 1), never); !errors.Is(err, peer.ErrTooLarge) {
		t.Fatalf("header of MaxHeader+1 bytes: %v", err)
	}
	if err := a.SendData(ctx, nil, r.Slice(0, 1<<20+1), never); !errors.Is(err, peer.ErrTooLarge) {
		t.Fatalf("payload above the peer's MaxData: %v", err)
	}
	foreign, err := tb.AllocRegion(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer foreign.Close()
	if err := a.SendData(ctx, nil, foreign.Slice(0, 10), never); !errors.Is(err, peer.ErrNotRegistered) {
		t.Fatalf("slice of another transport's region: %v", err)
	}
	if err := a.SendData(ctx, nil, peer.Slice{Region: r, Off: 2<<20 - 1, N: 2}, never); !errors.Is(err, peer.ErrNotRegistered) {
		t.Fatalf("slice beyond its region: %v", err)
	}
	// The largest allowed message still goes through.
	done := make(chan error, 1)
	if err := a.SendData(ctx, make([]byte, peer.MaxHeader), r.Slice(0, 1<<20), func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	m := recv(t, b, 10*time.Second)
	if len(m.Header) != peer.MaxHeader || len(m.Data.Bytes()) != 1<<20 {
		t.Fatalf("got header %d payload %d", len(m.Header), len(m.Data.Bytes()))
	}
	m.Data.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
