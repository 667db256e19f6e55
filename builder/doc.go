// Package builder assembles fragments from a configured set of readout
// sources into events (or timeslices) and emits them as Arrow record batches
// with the schema schemas.EventSchema.
//
// # Algorithm
//
// Every expected source gets a dense index (group-major, in each group's
// order) through a flat table indexed by source id (a map only when ids
// exceed 2^20). An event under construction holds one slot per source
// index: a reference to the caller's payload bytes, never a copy. Events are
// found by key (event id, or timeslice index) in an open-addressing table
// sized for MaxOpenEvents, and their states come from a free list, so adding
// a fragment allocates nothing and takes no map lookup.
//
//   - Complete: when the last expected source contributes, the event leaves
//     the table for the ready queue at once.
//   - Timeout: open events form a FIFO in order of first arrival; the
//     background goroutine emits those older than Timeout, flagged
//     StatusIncomplete, with missing_sources listing who sent nothing —
//     unless a missing source is behind the event and still sending
//     (within BehindWait): then the events wait for it (behind.go).
//   - Duplicate (same source, same event, still open): the first fragment
//     wins, the later one is discarded ("duplicate") and the event gets
//     StatusDuplicates.
//   - Late (its event was already emitted): discarded ("late", counted
//     per source); see below.
//   - Reset (its source's event counter reset alone and is not back among
//     the others'): discarded ("reset"); see "Event identity".
//   - Suspect (its id is far from the other sources' and they never
//     confirm it): discarded ("suspect_id"), counted per source; see
//     "Event identity".
//   - Unknown source: discarded ("unknown_source").
//   - CRC-32C mismatch: the fragment is kept, the event gets StatusCorrupt
//     and the source is listed in corrupt_sources. The check runs at batch
//     assembly, on the bytes just copied into the batch (the one pass
//     over them), by the workers that share the batch's rows.
//   - FlagSourceError or FlagTruncated on a fragment: StatusSourceError.
//
// Timeslice mode (Config.Mode = schemas.ModeTimeslice): see timeslice.go
// for keying, overlap and completion. A source may put many fragments in a
// timeslice; its part of the group's payload is all of them back to back in
// timestamp order (arrival order among equal timestamps), and its size is
// their total. A second fragment with the same source and timestamp is a
// duplicate. n_fragments counts core fragments and overlap copies.
//
// # Batches and the one copy
//
// The background goroutine closes a batch at BatchEvents events, when the
// first of them waited BatchLatency, on Flush/Close, or at once when an
// adder is blocked on a limit. It sizes every Arrow buffer exactly from
// per-event byte counts kept while adding, copies each payload once from the
// caller's memory into the LargeBinary value buffer of its group, checking
// its CRC-32C on the copied bytes while they are in the cache, writes the
// offsets and sizes itself and wraps the buffers with array.NewData (no
// Arrow builder, no reallocation). Every row's place being known before the
// copy, the rows are split into parts of about 256 KiB that the background
// goroutine and GOMAXPROCS-1 long-lived helpers take in turn (copyhelp.go:
// the helpers poll for a batch on a timer, since a goroutine woken by
// another reached an idle core only after ~0.1-2 ms on 2-core VMs), so
// that the per-byte work, the copy and the check, uses every core rather
// than the adder's and the emitter's one each, and nobody waits for a
// worker that has not started. Buffers come from Config.Allocator,
// by default a pooling allocator, because fresh memory is slow to touch.
// After the copy each fragment's reference is dropped; a caller's release
// callback runs when the last fragment of its buffer is dropped (copied or
// discarded), exactly once, never under the builder's lock.
//
// # Bounded memory and backpressure
//
// Held events (open, ready, or being assembled) are bounded by
// MaxOpenEvents and the payload bytes they reference by MaxBufferedBytes.
// A fragment that needs a new event or more bytes than allowed makes Add*
// block until memory is freed or ctx ends (then it is discarded as
// "cancelled"). Batches are delivered on a channel of capacity one; while
// nobody receives, no further batch is assembled, the ready queue grows to
// the limits and adding blocks: backpressure reaches the readout instead of
// memory growing.
//
// # Ledger
//
// Every fragment offered is counted once in FragmentsIn, and at every
// instant (checked by Ledger().Balanced()):
//
//	FragmentsIn == FragmentsInEvents + FragmentsOpen + FragmentsWaiting + Σ Discarded[reason]
//
// FragmentsWaiting counts fragments whose Add is blocked on a limit.
// FragmentsOpen counts fragments in events not yet assembled into a batch;
// assembly moves them to FragmentsInEvents. A timeslice overlap copy is not
// a fragment of its own and is counted only in its core timeslice.
//
// # Event identity
//
// One source must not be able to move the window for everyone: a corrupt
// or stale event id from one source (a far-ahead id, 2^63, its counter
// reset alone) may cost that source's fragments, never the others'
// events. And a counter reset of (nearly) every source, CMS's resync or a
// run boundary at LHCb or ATLAS, must not make every later event late.
// The rule (event mode without Config.Assigned; identity.go) is:
//
//   - Reference. Each source has the id of its latest fragment. The
//     reference is the median of these over the sources of the current
//     epoch; it exists once Quorum sources (default: more than half of
//     the expected sources) have sent. One source cannot move a median.
//     It is recomputed (O(sources)) only on the slow path below: after 64
//     fragments per source, or, before a fragment is called suspect,
//     after one per source.
//   - Slow path. The lookup of a fragment's event is keyed by (epoch,
//     id), the epoch being its source's. Only when the event is not open,
//     is a held suspect event (below), or the source's own id went back by
//     more than SuspectDistance since its previous fragment is the
//     fragment judged against the reference; everything else is the hot
//     path, one compare more than before.
//   - Near (within SuspectDistance of the reference, or no reference yet):
//     the late rule below, then an event opens. Events opened before the
//     reference existed are judged at their timeout, like suspect ones.
//   - Suspect (further than SuspectDistance): the fragment opens a held
//     event, apart from MaxOpenEvents (at most MaxSuspectEvents, a
//     quarter of them per source; beyond, the fragment is discarded as
//     suspect_id at once, it never waits). Other sources' fragments for
//     the same id join it, as for a common jump (ATLAS's ECR moves every
//     source's extended L1ID together). At its timeout (or a flush) a held
//     event is emitted when a quorum of sources is in it or its id is by
//     then near the reference; otherwise it is dissolved: every fragment
//     counted suspect_id for its source, its id not remembered as emitted
//     (so the others' fragments for that id, if they ever come, build it).
//   - Counter reset. A source whose own id went back by more than the
//     reset jump (a quarter of MaxOpenEvents, at least 256, at most
//     SuspectDistance) to more than that jump below the reference (or
//     far behind it), from an id that was not itself far, votes for a
//     reset: its fragments go to the next epoch (held events), and no
//     event waits for it as for a source behind (behind.go). Once Quorum
//     sources have voted, that epoch is the current one (Ledger.Resyncs,
//     and a log record): the voters form its reference, the late window
//     forgets the old epoch. A source still in the old epoch joins the new
//     one when its counter jumps back too or its ids come near the new
//     reference; until then its fragments go on into the old epoch's open
//     events (which build normally), or are late.
//   - One source's reset. When no quorum follows a vote (the voter's
//     first held event dissolves at its timeout), the source's counter
//     reset alone: one board resynced while the others went on. It is
//     counted (Ledger.ResetsBySource) and logged once, with its ids
//     before and after. What a DAQ does with a board out of sync is to
//     take none of its data until it is in step again, as CMS's event
//     builder does with a FED after a resync, rather than guess a mapping
//     from its ids to the others' (an offset that a lost or extra trigger
//     would make wrong without a sign): its fragments are discarded as
//     "reset" until its ids are back among the others' (no more than the
//     reset jump below the reference), then it builds again (a log
//     record). The others' events go out at Timeout without it,
//     incomplete, listing it missing. A vote whose next id is back among
//     the others' at once was a glitch: withdrawn, not counted, its held
//     event dissolved as suspect_id.
//   - Late. Once an event is emitted its key leaves the table, so a later
//     fragment for it would open a new event. The builder remembers the
//     last LateWindow emitted ids of the current epoch exactly
//     (emittedWindow: a ring and a hash set over it) and the minimum of
//     those that a quorum of sources contributed to. A fragment whose
//     event is not open is late if its id is in that set or below that
//     minimum (events are emitted roughly in id order, so it belongs to
//     one emitted long ago). An event fewer than a quorum sent to — one
//     source's stray id, built at its timeout before the others began —
//     never moves the minimum. Events delivered out of order are built.
//
// Limits, by construction: an id within SuspectDistance of the reference
// cannot be told from a real one, and costs at most the event it names; a
// source more than SuspectDistance behind the others looks like one whose
// counter reset, and its fragments are suspect; a jump of every source
// delivered source by source (each one's whole stream before the next's)
// costs the first sources' fragments past their share of held events
// (event-major delivery, the readout's, costs nothing); a reset by less than
// the reset jump is not recognized (the old epoch's ids then make the new
// one's late until it passes them); a packet of more than the reset jump's
// fragments sent twice after its events were built reads as its source's
// vote, withdrawn at its next packet. With fewer than a quorum of sources
// sending at all there is no reference: ids are taken as they come. The
// event_id column carries the id only: events after a resync repeat ids,
// and a store keyed by (run, event id) replaces the earlier ones (counted
// there as replaced). Timeslice mode keeps only the quorum rule of the
// lower edge (timestamps do not reset; a far timestamp costs its own
// slice and its source's later fragments).
//
// # Farm assignments
//
// In a farm a builder unit builds the event ids the event manager assigns
// it: assignments complete out of order, are not dense, and a reassigned
// old range arrives late by design, so the single-node late rule and the
// reference do not apply. With Config.Assigned, Expect(Assignment) names
// the ids (ranges) of each assignment and completeness is tracked per
// assignment:
//
//   - A fragment whose id is in an expected assignment and not yet built in
//     it opens (or joins) its event; one already built in it is late.
//   - A fragment for an id of no expected assignment is "late" when the id
//     was built or given up recently (the late set), else "unassigned".
//   - An assignment is done when each of its ids was built, or when no new
//     event of it opened for Timeout (its events have timed out by then;
//     ids without any fragment are reported missing and late from then
//     on), or at Close. Config.OnAssignmentDone gets an AssignmentReport
//     once every event built for it was delivered on Batches(): enough
//     for the BU to release it (received/decided policies) and for the
//     farm ledger.
//   - Expect refuses ids still expected in another live assignment, so an
//     id names one event; a reassignment of done ids is built again.
//
// # Invariants
//
//   - An event is in exactly one of: the table and FIFO (open), the ready
//     queue, a batch being assembled, the free list.
//   - held counts open + ready + assembling events (at most MaxOpenEvents
//     and MaxSuspectEvents together); heldB their bytes; suspectHeld those
//     opened by a suspect fragment (at most MaxSuspectEvents, until freed);
//     heldSuspect the open held events, per source at most a quarter of
//     MaxSuspectEvents. No open event is without a fragment.
//   - A slot is cleared when its fragment is copied or dissolved, before
//     the event returns to the free list.
//   - Every source is in no epoch, the current one, or (voting) the next;
//     fewer than Quorum vote; only held events are in the next epoch.
//   - Suspect and late discards split by source sum to Discarded
//     ["suspect_id"] and Discarded["late"]; a source's reset is noted
//     only once counted.
//   - Live assignments' ranges are sorted and disjoint; an assignment's
//     built ids are its set bits; its undelivered events are counted.
//
// Built with the invariants tag, every operation checks them.
package builder
