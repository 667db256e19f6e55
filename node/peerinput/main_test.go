package peerinput_test

import (
	"os"
	"testing"

	"github.com/sluice-daq/sluice/node/peerinput"
	"github.com/sluice-daq/sluice/node/transport"
)

func TestMain(m *testing.M) {
	transport.Register(peerinput.Transport) // package all does this for the node
	os.Exit(m.Run())
}
