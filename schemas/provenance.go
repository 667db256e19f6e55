package schemas

// PluginID says which plugin a trigger stage ran: what a stored event's
// provenance names for each stage that saw it. The trigger host makes one
// per stage when the stage starts; verdicts point to it.
type PluginID struct {
	Stage   string `json:"stage"`   // the stage's name in the configuration (e.g. "hlt1")
	Name    string `json:"plugin"`  // the plugin's name, as its description gives it
	Version string `json:"version"` // the plugin's version, as its description gives it
	// Digest is the SHA-256 of the plugin's executable (64 lowercase hex
	// digits), hashed once when the stage started; "" when unknown.
	Digest string `json:"sha256"`
}

// Step is what one trigger stage did with one event.
type Step struct {
	Plugin   *PluginID // the stage and its plugin; nil: the node decided without a stage
	Decision Decision
	Fired    uint64 // lines the plugin fired, before the prescales
	Lines    uint64 // lines kept after the prescales (Fired &^ Lines were prescaled away)
	Reason   string // the reason text (why it was deferred, ...)
}

// Step is v's own step: what its deciding stage did.
func (v *Verdict) Step() Step {
	return Step{Plugin: v.Plugin, Decision: v.Decision, Fired: v.Fired, Lines: v.Lines, Reason: v.Reason.Text}
}

// Steps are the steps of every stage that saw the event, in chain order:
// v.Trail, then v's own step when a stage decided (v.Stage != "" or
// v.Plugin != nil). Empty when no stage saw it.
func (v *Verdict) Steps() []Step {
	if v.Stage == "" && v.Plugin == nil {
		return v.Trail
	}
	return append(v.Trail[:len(v.Trail):len(v.Trail)], v.Step())
}

// Pass is one trigger pass over a stored event: the online one when it
// was first stored, and one per replay that decided it.
type Pass struct {
	Replay bool   // a replay pass (false: the online pass)
	At     uint64 // when the pass was stored, Unix ns
	Steps  []Step // the stages that saw the event, in chain order
}

// Provenance is how a stored event was built and what its passes did
// with it, oldest first; the event's missing and corrupt sources and its
// status are in its own columns.
type Provenance struct {
	Built  Built
	Passes []Pass
}

// Built is what the builder knew of an event beyond its columns, and
// which builder unit built it.
type Built struct {
	// Duplicated are the sources that sent more than one fragment for the
	// event (the builder kept the first), ascending.
	Duplicated []uint32 `json:"duplicated"`
	// Late are the sources whose fragment for the event arrived after the
	// builder emitted it (at its timeout, so they are among the missing)
	// and before its batch left the builder, ascending. A fragment later
	// still is counted in the builder's ledger (discarded "late") only.
	Late []uint32 `json:"late"`
	// BU is the farm node that built it, with its membership incarnation;
	// "" outside a farm.
	BU          string `json:"bu"`
	Incarnation uint64 `json:"incarnation"`
	// Assignment is the event manager's assignment the BU built it for
	// (0: none, outside a farm).
	Assignment uint64 `json:"assignment"`
}
