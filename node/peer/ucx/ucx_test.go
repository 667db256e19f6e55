//go:build ucx

package ucx_test

import (
	"testing"

	"github.com/sluice-daq/sluice/node/peer/peertest"
	"github.com/sluice-daq/sluice/node/peer/ucx"
)

var factory = peertest.Factory{Name: ucx.Name, Resources: ucx.Resources}

func TestMain(m *testing.M) { peertest.Main(m, factory) }

// TestConformance runs the suite over each UCX transport this machine can
// use without hardware: TCP on loopback and shared memory. (UCX 1.13's
// client-server endpoints need a TCP lane for their wireup: "sm" alone is
// "Destination is unreachable"; with "sm,tcp" active messages travel by
// shared memory, see TestLanes.)
func TestConformance(t *testing.T) {
	for _, tls := range []struct{ name, tls, dev string }{
		{"tcp", "tcp", "lo"},
		{"sm", "sm,tcp", "lo"},
	} {
		t.Run(tls.name, func(t *testing.T) {
			t.Setenv("UCX_TLS", tls.tls)
			if tls.dev != "" {
				t.Setenv("UCX_NET_DEVICES", tls.dev)
			}
			peertest.Run(t, factory)
		})
	}
}
