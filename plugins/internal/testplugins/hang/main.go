// Command hang is a test plugin that accepts every event but hangs forever
// when it meets the event id given by parameter event. With parameter
// once=FILE it hangs only if FILE does not exist yet (creating it), so that a
// restarted instance decides the same batch normally.
package main

import (
	"os"

	"github.com/sluice-daq/sluice/plugins/sdk"
	"github.com/sluice-daq/sluice/schemas"
)

type hang struct {
	event uint64
	once  string
}

func (h *hang) Describe() sdk.Description {
	return sdk.Description{Name: "hang", Version: "test", Lines: []string{"all"}}
}

func (h *hang) Configure(params map[string]string) error {
	if err := sdk.CheckParams(params, "event", "once"); err != nil {
		return err
	}
	var err error
	h.event, err = sdk.ParamUint(params, "event", 0)
	h.once = params["once"]
	return err
}

func (h *hang) Decide(ev *schemas.EventBatch, out []schemas.Verdict) error {
	for i := range out {
		if ev.EventID(i) == h.event {
			if h.once == "" {
				select {}
			}
			if f, err := os.OpenFile(h.once, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err == nil {
				f.Close()
				select {}
			}
		}
		out[i] = sdk.Accept(1)
	}
	return nil
}

func main() { sdk.Serve(&hang{}) }
