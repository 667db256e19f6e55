// Command passthrough is the example trigger plugin that accepts every event
// (optionally 1 in N by event id, parameter prescale=N). It is started by
// the sluice node, not by hand.
package main

import (
	"github.com/sluice-daq/sluice/plugins/examples/passthrough/passthrough"
	"github.com/sluice-daq/sluice/plugins/sdk"
)

func main() { sdk.Serve(&passthrough.Trigger{}) }
