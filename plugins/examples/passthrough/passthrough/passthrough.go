// Package passthrough is the decision logic of the passthrough example
// plugin: it accepts every event on its one line "all", or with parameter
// prescale=N only the events whose event id is a multiple of N (a prescale
// that depends on the event alone, so it survives plugin restarts and
// batch boundaries). It is the baseline of the plugin benchmarks.
package passthrough

import (
	"fmt"

	"github.com/sluice-daq/sluice/plugins/sdk"
	"github.com/sluice-daq/sluice/schemas"
)

// Trigger is the passthrough trigger; the zero value accepts everything.
type Trigger struct {
	prescale uint64
}

// Describe names the plugin and its one line, "all". It reads no payload,
// but asks for every column (Columns empty) so that, as the benchmarks'
// baseline, it receives whole batches like a real trigger would.
func (t *Trigger) Describe() sdk.Description {
	return sdk.Description{Name: "passthrough", Version: "1.0.0", Lines: []string{"all"}}
}

// Configure reads the optional parameter prescale (N >= 1).
func (t *Trigger) Configure(params map[string]string) error {
	if err := sdk.CheckParams(params, "prescale"); err != nil {
		return err
	}
	n, err := sdk.ParamUint(params, "prescale", 1)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("parameter prescale: must be at least 1")
	}
	t.prescale = n
	return nil
}

// Decide accepts every event (1 in prescale of them), rejects the rest.
func (t *Trigger) Decide(ev *schemas.EventBatch, out []schemas.Verdict) error {
	n := max(t.prescale, 1)
	for i := range out {
		if ev.EventID(i)%n == 0 {
			out[i] = sdk.Accept(1)
		} else {
			out[i] = sdk.Reject()
		}
	}
	return nil
}
