// Command l0calo is the example trigger plugin with the LHCb level-0
// selections (high-pT muon, di-muon, hadron, electron) on the emulator's
// detector-like payloads; see package l0. It is started by the sluice node.
package main

import (
	"github.com/sluice-daq/sluice/plugins/examples/l0calo/l0"
	"github.com/sluice-daq/sluice/plugins/sdk"
)

func main() { sdk.Serve(l0.New()) }
