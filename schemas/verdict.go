package schemas

import (
	"fmt"
	"iter"
	"math/bits"
)

// Decision is what a trigger decided about one event.
type Decision uint8

const (
	DecisionNone   Decision = 0 // not decided yet
	DecisionAccept Decision = 1
	DecisionReject Decision = 2
	DecisionDefer  Decision = 3
)

func (d Decision) String() string {
	switch d {
	case DecisionAccept:
		return "accept"
	case DecisionReject:
		return "reject"
	case DecisionDefer:
		return "defer"
	}
	return "none"
}

// MaxLines is the number of trigger lines a plugin can declare: one bit
// each in Verdict.Lines.
const MaxLines = 64

// Verdict is a trigger's decision on one event. It is the one type a
// decision has from the plugin that makes it (plugins/sdk) through the
// trigger host (plugins), the node and replay, to the store (storage),
// which keeps Decision, Lines, Stage and Reason.Text with the event.
//
// A plugin sets Decision, Lines and, if it has something to say,
// Reason.Text (sdk.Accept, sdk.Reject, sdk.Defer). The trigger host sets
// Stage and the reason's Kind and Plugin, applies the prescales to Lines,
// and adds Status bits.
type Verdict struct {
	Decision Decision // accept, reject or defer; DecisionNone: not decided
	Lines    uint64   // bit i set: line i of Stage's plugin fired (after prescales)
	// Stage is the trigger stage that decided (e.g. "hlt1"); "" when the
	// node decided without one (no online stage, a failed chain).
	Stage  string
	Reason Reason
	// Status holds the bits the trigger adds to the event's own status
	// (StatusTriggerError when its batch failed in the plugin repeatedly);
	// the store keeps the event's status with these bits added.
	Status EventStatus
	// Plugin names Stage's plugin (nil when no stage decided); Fired is
	// the lines it fired before the prescales; Trail is the steps of the
	// stages before Stage that accepted the event, in chain order. The
	// store keeps them as the event's provenance (Provenance).
	Plugin *PluginID
	Fired  uint64
	Trail  []Step
}

// Decided returns v or, when v has no decision (DecisionNone), v deferred
// with ReasonUndecided: an event no trigger decided is kept for replay to
// decide, never lost.
func (v Verdict) Decided() Verdict {
	if v.Decision == DecisionNone {
		v.Decision, v.Reason = DecisionDefer, Reason{Kind: ReasonUndecided, Text: "undecided"}
	}
	return v
}

// ReasonName is the verdict's reason as a metric label and ledger key,
// "stage/name" (e.g. "hlt1/backlog", "l0/l0calo"), or the reason's name
// alone when no stage decided (e.g. "no-online-stage"). Bounded in number:
// a few per stage.
func (v *Verdict) ReasonName() string {
	if v.Stage == "" {
		return v.Reason.Name()
	}
	return v.Stage + "/" + v.Reason.Name()
}

// Reason says why an event got its decision. Kind, one of a few, names it
// in metrics and ledgers; Text is free and kept with the event in the
// store (e.g. a plugin's message). The host's own reasons spell Text as
// the ledgers name them, the kind's name first ("fraction", "backlog:
// above 2048 events", "trigger-error: ..."), so that `sluice store ls`
// (stage gec, reason fraction) reads as the ledger (gec/fraction).
// The store keeps only Text: a Verdict read back from the store has Kind
// ReasonNone.
type Reason struct {
	Kind ReasonKind
	// Plugin is the name of the plugin (as its description gives it) whose
	// decision this is, for ReasonPlugin.
	Plugin string
	Text   string
}

// Name is the reason's name in metrics and ledgers: the kind's name
// ("fraction", "backlog", ...), or for ReasonPlugin the plugin's, so that a
// plugin's own deferrals are named by who made them.
func (r Reason) Name() string {
	if r.Kind == ReasonPlugin && r.Plugin != "" {
		return r.Plugin
	}
	return r.Kind.String()
}

// ReasonKind is what made a decision, when it was not simply a plugin's.
type ReasonKind uint8

const (
	ReasonNone ReasonKind = iota // not known (e.g. read back from the store)
	// ReasonPlugin: the stage's plugin decided so itself; Text is its
	// annotation, often empty.
	ReasonPlugin
	ReasonFraction // deferred by the stage's deferral fraction
	ReasonBacklog  // deferred whole: the stage's backlog was above its bound
	// ReasonPrescaled: rejected; the plugin accepted the event but the
	// host's prescales removed every line it fired.
	ReasonPrescaled
	// ReasonTriggerError: deferred because the plugin failed on the batch
	// repeatedly, or the chain failed; Status has StatusTriggerError.
	ReasonTriggerError
	ReasonNoOnlineStage // deferred: the node has no online trigger stage
	ReasonUndecided     // deferred: no trigger decided the event
)

var reasonNames = [...]string{"none", "plugin", "fraction", "backlog", "prescaled", "trigger-error", "no-online-stage", "undecided"}

func (k ReasonKind) String() string {
	if int(k) < len(reasonNames) {
		return reasonNames[k]
	}
	return fmt.Sprintf("reason(%d)", uint8(k))
}

// LineName names line bit of a plugin whose lines are names: names[bit],
// or "lineN" when the plugin did not name it.
func LineName(names []string, bit int) string {
	if bit < len(names) && names[bit] != "" {
		return names[bit]
	}
	return fmt.Sprintf("line%d", bit)
}

// FiredLines yields each bit set in lines, lowest first, with its name
// (LineName of names).
func FiredLines(lines uint64, names []string) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		for l := lines; l != 0; l &= l - 1 {
			b := bits.TrailingZeros64(l)
			if !yield(b, LineName(names, b)) {
				return
			}
		}
	}
}
