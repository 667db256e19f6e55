package node

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/sluice-daq/sluice/internal/texttable"
	"github.com/sluice-daq/sluice/node/emulator"
	"github.com/sluice-daq/sluice/plugins"
	"github.com/sluice-daq/sluice/schemas"
)

// Ledger is the end-of-run account of a node (and, during the run, a live
// snapshot of it): every fragment received and every event built is either
// in a later stage or counted under a reason. JSON names are the contract
// of `sluice run --summary-json`.
type Ledger struct {
	Node string `json:"node"`
	Run  uint32 `json:"run"`

	// Fragments: received by the builder from every input.
	FragmentsReceived  uint64            `json:"fragments_received"`
	FragmentsInEvents  uint64            `json:"fragments_in_events"`
	FragmentsDiscarded map[string]uint64 `json:"fragments_discarded"` // by reason ("duplicate", "late", "unknown_source", ...)
	FragmentsOpen      uint64            `json:"fragments_open"`      // held in events not yet emitted, or blocked on a builder limit (0 once stopped)
	// FragmentsSuspect splits fragments_discarded["suspect_id"] by source
	// id: fragments whose event id was far from the other sources' and
	// never confirmed (builder package doc, "Event identity").
	FragmentsSuspect map[uint32]uint64 `json:"fragments_suspect_by_source,omitempty"`
	// Resyncs counts the event-counter resets the builder detected (a
	// quorum of sources jumped back together); events after each were
	// built in a new epoch.
	Resyncs uint64 `json:"resyncs"`
	// CounterResets counts, by source id, the event-counter resets of a
	// source alone (its ids jumped back below the events already built
	// while the other sources went on; builder package doc, "Event
	// identity"): its fragments until it catches up are discarded as
	// "reset".
	CounterResets map[uint32]uint64 `json:"counter_resets_by_source,omitempty"`
	// FragmentsLate splits fragments_discarded["late"] by source id: the
	// sources whose fragments came after their event was built.
	FragmentsLate map[uint32]uint64 `json:"fragments_late_by_source,omitempty"`
	// EventsWaitedBehind counts events that waited past builder.timeout
	// for a source still sending behind the others (builder.behind_wait).
	EventsWaitedBehind uint64 `json:"events_waited_behind,omitempty"`
	// BatchesRelieved counts the batches the builder closed partial,
	// before batch_events and batch_latency, because a readout ring was
	// held by their events (a ring smaller than a batch's bytes).
	BatchesRelieved uint64 `json:"batches_relieved,omitempty"`
	// InputLosses are counted by the inputs before anything reached the
	// builder (a UDP packet never received, a TCP packet cut by a
	// disconnect, a packet that failed to decode), by "input/reason".
	InputLosses map[string]uint64 `json:"input_losses"`
	// InputBytes is what the inputs received as it arrived (whole
	// multi-fragment packets or native fragments, with their headers, the
	// unit an emulator's bytes_sent counts); BytesReceived is the fragment
	// payload bytes of it handed to the builder (headers excluded).
	InputBytes    uint64 `json:"input_bytes"`
	BytesReceived uint64 `json:"bytes_received"`
	// FragmentsFlagged are fragments an input handed on flagged as a
	// source error (transport.Stats.Flagged: kept, in their events), by
	// "input/reason" (e.g. a FEROL input's "fed_crc"); absent when none.
	FragmentsFlagged map[string]uint64 `json:"fragments_flagged,omitempty"`

	// Events (or timeslices) built and what became of them.
	EventsBuilt      uint64 `json:"events_built"`
	EventsComplete   uint64 `json:"events_complete"`
	EventsIncomplete uint64 `json:"events_incomplete"`
	EventsCorrupt    uint64 `json:"events_corrupt"`
	// EventsSourceError of the events built hold a fragment flagged by its
	// source or input (FragmentsFlagged, a truncated fragment):
	// schemas.StatusSourceError.
	EventsSourceError uint64 `json:"events_source_error,omitempty"`
	EventsAccepted    uint64 `json:"events_accepted"`
	EventsRejected    uint64 `json:"events_rejected"`
	EventsDeferred    uint64 `json:"events_deferred"`
	// DeferredBy splits EventsDeferred by reason ("fraction", "backlog",
	// "trigger-error", "no-online-stage", or a stage's own).
	DeferredBy map[string]uint64 `json:"deferred_by"`
	// Lines counts accepted events per trigger line ("stage/line") of the
	// stage that made the final decision.
	Lines map[string]uint64 `json:"lines"`
	// Stages is what each online trigger stage decided, in chain order.
	Stages []StageLedger `json:"stages"`
	// EventsInFlight were built and not decided yet (in the batch queue or
	// the chain); 0 once the run stopped.
	EventsInFlight uint64 `json:"events_in_flight"`

	// What the store acknowledged (durable under its sync policy), and
	// events kept by the chain that the store could not take, by reason.
	EventsStored         uint64            `json:"events_stored"`
	EventsStoredAccepted uint64            `json:"events_stored_accepted"`
	EventsStoredDeferred uint64            `json:"events_stored_deferred"`
	EventsDropped        map[string]uint64 `json:"events_dropped"`
	// NotStoredAtDrain are the ids of the events counted in EventsDropped
	// as not_stored_at_drain: kept by the chain, still held when the drain
	// timeout passed with the store refusing writes (disk budget).
	NotStoredAtDrain []uint64 `json:"not_stored_at_drain,omitempty"`
	// EventsUnacked were kept and handed to the store, which has not yet
	// reported them durable; 0 once the run stopped.
	EventsUnacked uint64 `json:"events_unacked"`
	BytesStored   uint64 `json:"bytes_stored"`
	// EventsReplaced of the stored events took the place of an event
	// already in the store under the same run and event id (a run number
	// reused, or a resend); the store then holds fewer new events.
	EventsReplaced uint64 `json:"events_replaced"`

	// Emulators is what each embedded readout emulator reported sending
	// (and the faults it injected), to compare with what was received.
	Emulators []emulator.Summary `json:"emulators,omitempty"`
	// Memory is the memory budget's split and each part's peak (nil in a
	// ledger made before the run opened its parts).
	Memory *MemoryStatus `json:"memory,omitempty"`
	// Farm is what the node did as one node of a farm (nil: alone): its
	// builder's fragments are those of the assignments its BU was given,
	// its inputs' packets went to its RU.
	Farm *FarmLedger `json:"farm,omitempty"`

	DurationSeconds float64 `json:"duration_seconds"` // from start-up to stopped
	// StartupSeconds of the duration went to opening the store and
	// starting the plugins, before the inputs opened.
	StartupSeconds float64 `json:"startup_seconds"`
	// FlowSeconds of the duration is the data's flow: from the first
	// fragment the builder was offered to the last batch finished with
	// (stored, or released undecided or rejected, and acknowledged); 0
	// when no fragment came. What the node moves per second is
	// BytesReceived/FlowSeconds; before the flow are start-up and the
	// wait for the first fragment, after it the shutdown (plugin
	// processes, store close).
	FlowSeconds float64 `json:"flow_seconds"`
	Balanced    bool    `json:"balanced"`
	// NotStarted, when set, says why the run failed before its first
	// event: before its inputs opened, or with nothing received, built,
	// stored or sent by its emulators when it failed (an emulator or an
	// input that could not start). Such a ledger is not balanced: it is
	// no run at all, and the run is not recorded as ended on the store.
	NotStarted string `json:"not_started,omitempty"`
	// Imbalance says which identity failed, with the numbers.
	Imbalance []string `json:"imbalance,omitempty"`
}

// StageLedger is what one trigger stage did with the events it saw:
// Accepted were passed on to the next stage (or, in the last stage, kept),
// Rejected and Deferred stopped there. Seen = Accepted + Rejected +
// Deferred, and a stage sees what the stage before it accepted.
type StageLedger struct {
	Name     string `json:"name"`
	Seen     uint64 `json:"seen"`
	Accepted uint64 `json:"accepted"`
	Rejected uint64 `json:"rejected"`
	// Prescaled of the rejected events were accepted by the stage's plugin
	// but lost every line to the stage's prescales.
	Prescaled uint64 `json:"prescaled"`
	Deferred  uint64 `json:"deferred"`
	// Lines counts the accepted events each line fired on (after
	// prescales), by line name.
	Lines map[string]uint64 `json:"lines"`
	// Shadow is what the stage's shadow plugin compared, skipped and
	// wrote to the store's shadow stream (absent without a shadow).
	Shadow *ShadowLedger `json:"shadow,omitempty"`
}

// ShadowLedger is a shadow's account: every event its stage's plugin
// decided is compared or skipped (by reason); of the differing ones,
// stored in the store's shadow stream or not (by reason).
type ShadowLedger struct {
	Compared  uint64            `json:"compared"`
	Agreeing  uint64            `json:"agreeing"`
	Differing uint64            `json:"differing"`
	Skipped   map[string]uint64 `json:"skipped"`
	Stored    uint64            `json:"stored"`
	Unstored  map[string]uint64 `json:"unstored"`
}

// stageLedgers is the ledger's account of each trigger stage, from the
// chain's own counters.
func stageLedgers(stages []plugins.StageState) []StageLedger {
	out := make([]StageLedger, len(stages))
	for i, st := range stages {
		out[i] = StageLedger{Name: st.Name, Seen: st.Seen(), Accepted: st.Accepted, Rejected: st.Rejected,
			Prescaled: st.Prescaled, Deferred: st.Deferred, Lines: map[string]uint64{}}
		for b, k := range st.Lines {
			if k != 0 {
				out[i].Lines[schemas.LineName(st.Description.Lines, b)] = k
			}
		}
		if sh := st.Shadow; sh != nil {
			l := &ShadowLedger{Compared: sh.Compared, Agreeing: sh.Agreeing, Differing: sh.Differ(), Skipped: map[string]uint64{},
				Stored: sh.Stored, Unstored: map[string]uint64{}}
			for _, k := range sh.Skipped {
				l.Skipped[k.Reason] = k.Events
			}
			for _, k := range sh.Unstored {
				l.Unstored[k.Reason] = k.Events
			}
			out[i].Shadow = l
		}
	}
	return out
}

// Check fills Balanced and Imbalance. A ledger balances when:
//   - fragments received = fragments in events + discarded + open;
//   - events built = accepted + rejected + deferred + in flight;
//   - accepted + deferred = stored + dropped + unacknowledged, and the
//     stored events split into the accepted and deferred streams.
//
// A final ledger (the run stopped) also needs nothing open, in flight or
// unacknowledged.
func (l *Ledger) Check(final bool) {
	l.Imbalance = nil
	bad := func(format string, args ...any) { l.Imbalance = append(l.Imbalance, fmt.Sprintf(format, args...)) }
	disc := sum(l.FragmentsDiscarded)
	if l.FragmentsReceived != l.FragmentsInEvents+disc+l.FragmentsOpen {
		bad("fragments: received %d != in events %d + discarded %d + open %d",
			l.FragmentsReceived, l.FragmentsInEvents, disc, l.FragmentsOpen)
	}
	if d := l.EventsAccepted + l.EventsRejected + l.EventsDeferred + l.EventsInFlight; l.EventsBuilt != d {
		bad("events: built %d != accepted %d + rejected %d + deferred %d + in flight %d",
			l.EventsBuilt, l.EventsAccepted, l.EventsRejected, l.EventsDeferred, l.EventsInFlight)
	}
	dropped := sum(l.EventsDropped)
	if kept := l.EventsAccepted + l.EventsDeferred; kept != l.EventsStored+dropped+l.EventsUnacked {
		bad("events: accepted %d + deferred %d != stored %d + dropped %d + unacknowledged %d",
			l.EventsAccepted, l.EventsDeferred, l.EventsStored, dropped, l.EventsUnacked)
	}
	if l.EventsStored != l.EventsStoredAccepted+l.EventsStoredDeferred {
		bad("store: stored %d != accepted stream %d + deferred stream %d",
			l.EventsStored, l.EventsStoredAccepted, l.EventsStoredDeferred)
	}
	if final {
		if l.FragmentsOpen != 0 {
			bad("fragments: %d still open after the run stopped", l.FragmentsOpen)
		}
		if l.EventsInFlight != 0 {
			bad("events: %d built but never decided", l.EventsInFlight)
		}
		if l.EventsUnacked != 0 {
			bad("events: %d never acknowledged by the store", l.EventsUnacked)
		}
		if l.Farm != nil && l.Farm.Agent.RU != nil && l.Farm.Agent.RU.Held != 0 {
			bad("farm: the readout unit still holds %d packets no builder unit released", l.Farm.Agent.RU.Held)
		}
	}
	l.Balanced = len(l.Imbalance) == 0
}

// empty reports whether the ledger counts nothing received, lost at the
// inputs, built, stored or sent by an emulator: a run that failed with
// such a ledger failed before its first event.
func (l *Ledger) empty() bool {
	if l.FragmentsReceived+l.InputBytes+sum(l.InputLosses)+l.EventsBuilt+l.EventsStored+l.EventsReplaced != 0 {
		return false
	}
	for _, e := range l.Emulators {
		if e.PacketsSent+e.FragmentsSent+e.BytesSent != 0 {
			return false
		}
	}
	return true
}

// WriteJSON writes the ledger as indented JSON to path.
func (l *Ledger) WriteJSON(path string) error {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// WriteTable prints the ledger for an operator: one quantity per line,
// its name left-aligned (parts and reasons indented under their total) and
// its value right-aligned, and the balance verdict last.
func (l *Ledger) WriteTable(w io.Writer) error {
	var tb texttable.Table
	row := tb.Row
	byReason := func(m map[string]uint64) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if m[k] != 0 {
				row("    "+k, m[k])
			}
		}
	}
	if l.NotStarted != "" {
		_, err := fmt.Fprintf(w, "run %d on %s did not start: %s\n", l.Run, l.Node, l.NotStarted)
		return err
	}
	row(fmt.Sprintf("run %d on %s", l.Run, l.Node), fmt.Sprintf("%.1f s", l.DurationSeconds))
	row("  of which start-up (s)", fmt.Sprintf("%.1f", l.StartupSeconds))
	row("  of which data flow (s)", fmt.Sprintf("%.1f", l.FlowSeconds))
	row("fragments received", l.FragmentsReceived)
	row("  in events", l.FragmentsInEvents)
	row("  discarded", sum(l.FragmentsDiscarded))
	byReason(l.FragmentsDiscarded)
	for _, s := range slices.Sorted(maps.Keys(l.FragmentsSuspect)) {
		row(fmt.Sprintf("      of source %d", s), l.FragmentsSuspect[s])
	}
	if l.FragmentsOpen != 0 {
		row("  still open", l.FragmentsOpen)
	}
	if sum(l.InputLosses) > 0 {
		row("lost at the inputs", sum(l.InputLosses))
		byReason(l.InputLosses)
	}
	if sum(l.FragmentsFlagged) > 0 {
		row("flagged by the inputs (kept in their events)", sum(l.FragmentsFlagged))
		byReason(l.FragmentsFlagged)
	}
	row("input bytes (packets with headers)", l.InputBytes)
	row("fragment payload bytes into the builder", l.BytesReceived)
	for _, e := range l.Emulators {
		row("emulator "+e.To+" sent fragments", e.FragmentsSent)
		byReason(e.FaultFragments)
		row("  sent bytes (packets with headers)", e.BytesSent)
		if e.BytesPlaced != 0 {
			row("  of them in the ring from a lap before (headers written only)", e.BytesPlaced)
		}
	}
	if f := l.Farm; f != nil {
		row("farm node ("+f.Roles+"): assignments built here", f.Assignments)
		row("  decided", f.Decided)
		if f.GivenUp != 0 {
			row("  given up (not all events decided in time)", f.GivenUp)
		}
		row("  event ids with fragments", f.Events)
		row("  fragments given to the builder", f.Fragments)
		row("  fragments of other assignments (not built here)", f.OutsideAssignment)
		if f.Unassigned != 0 {
			row("  events decided outside any assignment", f.Unassigned)
		}
		if f.SplitEvents != 0 {
			row("  events split across packets (packing not aligned)", f.SplitEvents)
		}
		if ru := f.Agent.RU; ru != nil {
			row("farm readout unit: packets freed", ru.Freed)
			if ru.WaitedBehind != 0 {
				row("  assignments that waited past farm.wait for a source behind", ru.WaitedBehind)
			}
			if ru.Late != 0 {
				row("  late (their events built without them)", ru.Late)
			}
			if never := ru.NeverAnnouncedTotal(); never != 0 {
				row("  elements the trigger source never named", never)
			}
			row("  still held", ru.Held)
		}
		if bu := f.Agent.BU; bu != nil && bu.WaitedFinal != 0 {
			row("farm builder unit: assignments that waited past farm.wait for a live RU", bu.WaitedFinal)
			row("  built without its data at the behind limit", bu.FinalTimedOut)
		}
	}
	row("events built", l.EventsBuilt)
	if l.Resyncs != 0 {
		row("  after event-counter resets", l.Resyncs)
	}
	for _, s := range slices.Sorted(maps.Keys(l.CounterResets)) {
		row(fmt.Sprintf("  event-counter resets of source %d alone", s), l.CounterResets[s])
	}
	if l.EventsWaitedBehind != 0 {
		row("  waited past the timeout for a source behind", l.EventsWaitedBehind)
	}
	row("  incomplete", l.EventsIncomplete)
	row("  corrupt", l.EventsCorrupt)
	if l.EventsSourceError != 0 {
		row("  with a source error (a fragment flagged)", l.EventsSourceError)
	}
	row("  accepted", l.EventsAccepted)
	row("  rejected", l.EventsRejected)
	row("  deferred", l.EventsDeferred)
	byReason(l.DeferredBy)
	if l.EventsInFlight != 0 {
		row("  in flight", l.EventsInFlight)
	}
	if l.BatchesRelieved != 0 {
		row("batches closed early to free the readout ring", l.BatchesRelieved)
	}
	for i, st := range l.Stages {
		row("stage "+st.Name+" seen", st.Seen)
		if i+1 < len(l.Stages) {
			row("  accepted, passed on to "+l.Stages[i+1].Name, st.Accepted)
		} else {
			row("  accepted", st.Accepted)
		}
		row("  rejected", st.Rejected)
		if st.Prescaled != 0 {
			row("    by the prescales", st.Prescaled)
			row("    by the plugin", st.Rejected-st.Prescaled)
		}
		row("  deferred", st.Deferred)
		for _, k := range slices.Sorted(maps.Keys(st.Lines)) {
			row("  line "+k, st.Lines[k])
		}
	}
	row("events stored", l.EventsStored)
	row("  accepted stream", l.EventsStoredAccepted)
	row("  deferred stream", l.EventsStoredDeferred)
	if sum(l.EventsDropped) > 0 {
		row("events dropped", sum(l.EventsDropped))
		byReason(l.EventsDropped)
	}
	if l.EventsUnacked != 0 {
		row("  not yet durable", l.EventsUnacked)
	}
	if l.EventsReplaced != 0 {
		row("  replacing stored events", l.EventsReplaced)
	}
	row("bytes stored", l.BytesStored)
	l.Memory.TableRows(&tb)
	if l.Balanced {
		row("balanced", "yes")
	} else {
		row("balanced", "NO")
	}
	if _, err := tb.WriteTo(w); err != nil {
		return err
	}
	for _, s := range l.Imbalance {
		if _, err := fmt.Fprintln(w, "  unbalanced:", s); err != nil {
			return err
		}
	}
	return nil
}

// String is the one-line form used in logs.
func (l *Ledger) String() string {
	if l.NotStarted != "" {
		return fmt.Sprintf("run %d did not start: %s", l.Run, l.NotStarted)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "run %d: fragments %d (in events %d, discarded %d), events %d (accepted %d, rejected %d, deferred %d), stored %d, balanced %v",
		l.Run, l.FragmentsReceived, l.FragmentsInEvents, sum(l.FragmentsDiscarded), l.EventsBuilt,
		l.EventsAccepted, l.EventsRejected, l.EventsDeferred, l.EventsStored, l.Balanced)
	if d := sum(l.EventsDropped); d > 0 {
		fmt.Fprintf(&b, ", events dropped %d", d)
	}
	if l.EventsReplaced > 0 {
		fmt.Fprintf(&b, ", stored events replaced %d", l.EventsReplaced)
	}
	return b.String()
}

func sum(m map[string]uint64) uint64 {
	var t uint64
	for _, v := range m {
		t += v
	}
	return t
}

// mib is n bytes in MiB, to 0.1.
func mib(n uint64) string { return fmt.Sprintf("%.1f", float64(n)/(1<<20)) }
