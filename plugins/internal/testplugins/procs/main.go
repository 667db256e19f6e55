// Command procs is a test plugin that accepts every event with the reason
// text "GOMAXPROCS=N", N being what the Go runtime runs the plugin with.
package main

import (
	"fmt"
	"runtime"

	"github.com/sluice-daq/sluice/plugins/sdk"
	"github.com/sluice-daq/sluice/schemas"
)

type procs struct{}

func (procs) Describe() sdk.Description {
	return sdk.Description{Name: "procs", Version: "test", Lines: []string{"all"}}
}

func (procs) Configure(params map[string]string) error { return sdk.CheckParams(params) }

func (procs) Decide(_ *schemas.EventBatch, out []schemas.Verdict) error {
	for i := range out {
		out[i] = sdk.Accept(1)
		out[i].Reason.Text = fmt.Sprintf("GOMAXPROCS=%d", runtime.GOMAXPROCS(0))
	}
	return nil
}

func main() { sdk.Serve(procs{}) }
