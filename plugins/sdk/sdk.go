// Package sdk is what a trigger plugin's author programs against. A plugin
// is a small program whose main calls Serve with a value implementing
// Trigger; the sluice node starts it as a separate process (through
// hashicorp/go-plugin, over gRPC) and hands it batches of events.
//
//	type myTrigger struct{ threshold uint32 }
//
//	func (t *myTrigger) Describe() sdk.Description { ... }
//	func (t *myTrigger) Configure(p map[string]string) error { ... }
//	func (t *myTrigger) Decide(ev *schemas.EventBatch, out []sdk.Result) error {
//		for i := range out {
//			out[i] = sdk.Accept(1) // line 0 fired
//		}
//		return nil
//	}
//
//	func main() { sdk.Serve(&myTrigger{}) }
//
// Event batches are Arrow record batches of schemas.EventSchema; the
// schemas.EventBatch view gives typed access (event id, status bits, a
// source's payload, a source group's payloads) without indexing columns.
package sdk

import (
	"github.com/sluice-daq/sluice/schemas"
)

// MaxLines is the number of trigger lines a plugin can declare: one bit each
// in a uint64 lines mask.
const MaxLines = 64

// Description is what a plugin says about itself.
type Description struct {
	Name    string   // plugin name, e.g. "l0calo"; labels its logs and metrics
	Version string   // free text, e.g. "1.0.0"
	Lines   []string // trigger line names; line i is bit i of Result.Lines
	// Columns lists the source groups whose payloads the plugin reads (e.g.
	// "ecal", "muon"); empty means all. The host leaves the payload columns of
	// other groups out of the batches it sends.
	Columns []string
}

// Result is a plugin's decision on one event.
type Result struct {
	Decision schemas.Decision // accept, reject or defer; never DecisionNone
	Lines    uint64           // bit i set: trigger line i fired
	// Annotation is optional free text kept with the event (e.g. why it was
	// deferred); empty for most events.
	Annotation string
}

// Accept is an accepted event whose given lines fired.
func Accept(lines uint64) Result { return Result{Decision: schemas.DecisionAccept, Lines: lines} }

// Reject is a rejected event.
func Reject() Result { return Result{Decision: schemas.DecisionReject} }

// Defer is an event the plugin wants processed later, with the reason.
func Defer(reason string) Result {
	return Result{Decision: schemas.DecisionDefer, Annotation: reason}
}

// Trigger is the one interface a plugin implements. The host calls Describe
// once, then Configure once with the parameters from the node's config, then
// Decide once per event batch. Calls are never concurrent.
type Trigger interface {
	Describe() Description
	// Configure validates and applies the parameters; an error stops the node
	// at start-up with the message.
	Configure(params map[string]string) error
	// Decide fills out[i] for every row i of ev (len(out) == ev.Len()). out
	// arrives zeroed. ev and its payloads are valid only during the call and
	// read-only (they may lie in the host's shared memory, mapped read-only).
	// An error (or a panic) fails the whole batch; the host retries it and,
	// after repeated failures, defers its events with StatusTriggerError.
	Decide(ev *schemas.EventBatch, out []Result) error
}
