package builder

import "time"

// Discard reasons: the keys of Ledger.Discarded.
const (
	ReasonDuplicate     = "duplicate"      // same source, same event id (timeslice: same timestamp) seen before; first wins
	ReasonLate          = "late"           // its event (timeslice) was already emitted
	ReasonUnknownSource = "unknown_source" // source id not in Config.Groups
	ReasonCancelled     = "cancelled"      // the caller's context ended while adding blocked
	ReasonClosed        = "closed"         // offered after Close
	ReasonTooLarge      = "too_large"      // payload of 4 GiB or more: cannot be sized in an event batch
	ReasonSuspect       = "suspect_id"     // its event id was far from the other sources' and they never confirmed it (package doc, "Event identity")
	ReasonUnassigned    = "unassigned"     // Config.Assigned: its event id is in no assignment expected or recently done
	ReasonReset         = "reset"          // its source's event counter reset alone: sent until its ids are back among the other sources' (package doc, "Event identity")
)

// reason indexes the fixed discard counters, so that counting a discard on
// the hot path is an array increment, not a map update.
type reason uint8

const (
	rDuplicate reason = iota
	rLate
	rUnknownSource
	rCancelled
	rClosed
	rTooLarge
	rSuspect
	rUnassigned
	rReset
	nReasons
)

var reasonNames = [nReasons]string{ReasonDuplicate, ReasonLate, ReasonUnknownSource, ReasonCancelled, ReasonClosed, ReasonTooLarge, ReasonSuspect, ReasonUnassigned, ReasonReset}

// Ledger is a consistent snapshot of the builder's counters. Fragments
// balance at every instant:
//
//	FragmentsIn == FragmentsInEvents + FragmentsOpen + FragmentsWaiting + Discards()
//
// A timeslice overlap copy is not a new fragment: it is counted once, in the
// timeslice whose core holds it.
type Ledger struct {
	FragmentsIn uint64 // every fragment offered to AddFragment/AddPacket
	BytesIn     uint64 // their payload bytes
	// FirstFragmentAt is when the first fragment was offered (zero until
	// then): where a run's data flow begins.
	FirstFragmentAt   time.Time
	FragmentsInEvents uint64            // fragments inside emitted events, counted when their batch is assembled
	FragmentsOpen     uint64            // fragments held in events not yet in a batch
	FragmentsWaiting  uint64            // fragments offered whose Add is blocked on a limit (backpressure); 0 once Adds return
	Discarded         map[string]uint64 // by reason (Reason* constants); every reason present, 0 when none
	EventsBuilt       uint64            // events (or timeslices) emitted
	EventsComplete    uint64            // emitted with every expected source present
	EventsIncomplete  uint64            // emitted at timeout / flush with missing sources
	EventsCorrupt     uint64            // with >= 1 CRC mismatch
	// EventsSourceError counts the events with a fragment its source or
	// input flagged (schemas.FlagSourceError, FlagTruncated: e.g. a FEROL
	// FED fragment whose CRC-16 does not match): StatusSourceError.
	EventsSourceError uint64
	OverlapCopies     uint64 // timeslice mode: fragments also given to the previous timeslice
	OverlapLate       uint64 // timeslice mode: overlap copies not made, the previous timeslice was already emitted
	BatchesBuilt      uint64 // record batches assembled
	// BatchesRelieved counts the batches closed partial, before
	// BatchEvents and BatchLatency, because an input's buffer was held by
	// their events (Relieve: a readout ring smaller than a batch).
	BatchesRelieved uint64
	// SuspectBySource splits Discarded["suspect_id"] by source id; only
	// sources with suspect fragments are present.
	SuspectBySource map[uint32]uint64
	// Resyncs counts the event-counter resets detected (a quorum of sources
	// jumped back together); events after each build normally.
	Resyncs uint64
	// ResetsBySource counts, by source id, the event-counter resets of a
	// source alone: its ids went back to events already built while the
	// other sources went on, and no quorum followed within Timeout. Its
	// fragments until its ids are back among the others' are discarded
	// as "reset". Only sources with a reset are present.
	ResetsBySource map[uint32]uint64
	// LateBySource splits Discarded["late"] by source id; only sources
	// with late fragments are present.
	LateBySource map[uint32]uint64
	// EventsWaitedBehind counts the events that waited past Timeout for a
	// source still sending behind the others (Config.BehindWait).
	EventsWaitedBehind uint64
	// Config.Assigned: assignments done, and the event ids of those for
	// which no fragment at all arrived (not fragments: not in the balance).
	AssignmentsDone uint64
	EventsMissing   uint64
}

// Balanced reports whether FragmentsIn == FragmentsInEvents + FragmentsOpen +
// FragmentsWaiting + Discards().
func (l Ledger) Balanced() bool {
	return l.FragmentsIn == l.FragmentsInEvents+l.FragmentsOpen+l.FragmentsWaiting+l.Discards()
}

// Discards is the sum of Discarded over every reason.
func (l Ledger) Discards() uint64 {
	var s uint64
	for _, v := range l.Discarded {
		s += v
	}
	return s
}
