// Command panicky is a test plugin that accepts every event except that it
// panics (mode=panic, the default) or exits with status 2 (mode=exit) when
// it meets the event id given by parameter event.
package main

import (
	"fmt"
	"os"

	"github.com/sluice-daq/sluice/plugins/sdk"
	"github.com/sluice-daq/sluice/schemas"
)

type panicky struct {
	event uint64
	exit  bool
}

func (p *panicky) Describe() sdk.Description {
	return sdk.Description{Name: "panicky", Version: "test", Lines: []string{"all"}}
}

func (p *panicky) Configure(params map[string]string) error {
	if err := sdk.CheckParams(params, "event", "mode"); err != nil {
		return err
	}
	var err error
	p.event, err = sdk.ParamUint(params, "event", 0)
	p.exit = params["mode"] == "exit"
	return err
}

func (p *panicky) Decide(ev *schemas.EventBatch, out []schemas.Verdict) error {
	for i := range out {
		if ev.EventID(i) == p.event {
			if p.exit {
				sdk.Logger("panicky").Error("exiting on event", "event", p.event)
				os.Exit(2)
			}
			panic(fmt.Sprintf("panicky: bad event %d", p.event))
		}
		out[i] = sdk.Accept(1)
	}
	return nil
}

func main() { sdk.Serve(&panicky{}) }
