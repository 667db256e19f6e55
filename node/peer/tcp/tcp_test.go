package tcp_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/peer"
	"github.com/sluice-daq/sluice/node/peer/peertest"
	"github.com/sluice-daq/sluice/node/peer/tcp"
)

var factory = peertest.Factory{Name: tcp.Name}

func TestMain(m *testing.M) { peertest.Main(m, factory) }

func TestConformance(t *testing.T) { peertest.Run(t, factory) }

// TestGarbageConnection: a connection that does not speak the protocol is
// refused and counted; the transport keeps serving others.
func TestGarbageConnection(t *testing.T) {
	srv, err := tcp.New(peertest.Config("server"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, junk := range [][]byte{[]byte("GET / HTTP/1.0\r\n\r\n"), {1, 0, 0, 0, 0xff, 0xff, 0, 0}, {}} {
		nc, err := net.Dial("tcp", srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		nc.Write(junk)
		nc.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for srv.Stats().Refused[peer.RefusedMalformed] < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("refused: %v", srv.Stats().Refused)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cl, err := tcp.New(peertest.Config("client"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cl.Connect(ctx, srv.Addr()); err != nil {
		t.Fatalf("connect after garbage: %v", err)
	}
}
