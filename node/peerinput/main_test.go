package peerinput_test

import (
	"os"
	"testing"

	"github.com/sluice-daq/sluice/node/internal/transporttest"
	"github.com/sluice-daq/sluice/node/peerinput"
	"github.com/sluice-daq/sluice/node/transport"
)

func TestMain(m *testing.M) {
	transporttest.MaybeChild(buildBenchChild)
	transport.Register(peerinput.Transport) // package all does this for the node
	os.Exit(m.Run())
}
