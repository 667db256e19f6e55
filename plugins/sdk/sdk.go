// Package sdk is what a trigger plugin's author programs against. A plugin
// is a small program whose main calls Serve with a value implementing
// Trigger; the sluice node starts it as a separate process (through
// hashicorp/go-plugin, over gRPC) and hands it batches of events.
//
//	type myTrigger struct{ threshold uint32 }
//
//	var lines = sdk.Lines{"big", "scifi_busy"}
//
//	func (t *myTrigger) Describe() sdk.Description {
//		return sdk.Description{Name: "my", Version: "1", Lines: lines}
//	}
//	func (t *myTrigger) Configure(p map[string]string) error { ... }
//	func (t *myTrigger) Decide(ev *schemas.EventBatch, out []schemas.Verdict) error {
//		for i := range out {
//			out[i] = lines.Accept("big") // or sdk.Accept(1 << 0): a bitmask
//		}
//		return nil
//	}
//
//	func main() { sdk.Serve(&myTrigger{}) }
//
// Event batches are Arrow record batches of schemas.EventSchema; the
// schemas.EventBatch view gives typed access (event id, status bits, a
// source's payload, a source group's payloads) without indexing columns.
// A decision is a schemas.Verdict, the type it keeps through the host and
// the node to the store. The host may send the next batch before the last
// is answered; Serve still calls Decide one batch at a time, in the
// host's order, so a Trigger needs no locking.
package sdk

import (
	"github.com/sluice-daq/sluice/schemas"
)

// Description is what a plugin says about itself.
type Description struct {
	Name    string   // plugin name, e.g. "l0calo"; labels its logs and metrics
	Version string   // free text, e.g. "1.0.0"
	Lines   []string // trigger line names, at most schemas.MaxLines; line i is bit i of Verdict.Lines
	// Columns lists the source groups whose payloads the plugin reads (e.g.
	// "ecal", "muon"); empty means all. The host leaves the payload columns of
	// other groups out of the batches it sends.
	Columns []string
}

// Accept is an accepted event whose lines fired: a bitmask, bit i the
// line Description.Lines[i] names (Lines.Accept takes the names).
func Accept(lines uint64) schemas.Verdict {
	return schemas.Verdict{Decision: schemas.DecisionAccept, Lines: lines}
}

// Reject is a rejected event.
func Reject() schemas.Verdict { return schemas.Verdict{Decision: schemas.DecisionReject} }

// Defer is an event the plugin wants processed later, with the reason: free
// text kept with the event in the store (the node's ledger names the
// deferral by the stage and the plugin's name).
func Defer(reason string) schemas.Verdict {
	return schemas.Verdict{Decision: schemas.DecisionDefer, Reason: schemas.Reason{Text: reason}}
}

// Trigger is the one interface a plugin implements. The host calls Describe
// once, then Configure once with the parameters from the node's config, then
// Decide once per event batch. Calls are never concurrent.
type Trigger interface {
	Describe() Description
	// Configure validates and applies the parameters; an error stops the node
	// at start-up with the message.
	Configure(params map[string]string) error
	// Decide fills out[i] for every row i of ev (len(out) == ev.Len()) with
	// a decision, its lines and, optionally, Reason.Text (free text kept
	// with the event, e.g. why it was deferred); the host ignores the other
	// fields. out arrives zeroed. ev and its payloads are valid only during
	// the call and read-only (they may lie in the host's shared memory,
	// mapped read-only). An error (or a panic) fails the whole batch; the
	// host retries it and, after repeated failures, defers its events with
	// StatusTriggerError.
	Decide(ev *schemas.EventBatch, out []schemas.Verdict) error
}
