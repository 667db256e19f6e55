package peer_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-daq/sluice/node/peer"
)

// Asked for ucx, a binary built without it says so and how to build one
// with it (this test binary imports no transport: none is registered).
func TestMissingUCXSaysHowToBuild(t *testing.T) {
	_, err := peer.Open("ucx", peer.Config{Node: "n", Listen: "127.0.0.1:0"})
	if !errors.Is(err, peer.ErrUnknownTransport) {
		t.Fatalf("open ucx: %v, want ErrUnknownTransport", err)
	}
	for _, want := range []string{"built without UCX", "libucx-dev", "-tags ucx", "make build"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if err := peer.Missing("carrier-pigeon"); !errors.Is(err, peer.ErrUnknownTransport) || !strings.Contains(err.Error(), "tcp, ucx") {
		t.Errorf("unknown name: %v, want ErrUnknownTransport naming tcp, ucx", err)
	}
}
