// Command gec is the example trigger plugin with a global event cut on LHCb
// raw data (summed UT and SciFi bank sizes by default); see package gec. It
// is started by the sluice node.
package main

import (
	"github.com/sluice-daq/sluice/plugins/examples/gec/gec"
	"github.com/sluice-daq/sluice/plugins/sdk"
)

func main() { sdk.Serve(gec.New()) }
