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
//     StatusIncomplete, with missing_sources listing who sent nothing.
//   - Duplicate (same source, same event, still open): the first fragment
//     wins, the later one is discarded ("duplicate") and the event gets
//     StatusDuplicates.
//   - Late (its event was already emitted): discarded ("late"); see below.
//   - Unknown source: discarded ("unknown_source").
//   - CRC-32C mismatch: the fragment is kept, the event gets StatusCorrupt
//     and the source is listed in corrupt_sources. The check runs in the
//     caller's goroutine, outside the lock, so several inputs check in
//     parallel.
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
// caller's memory into the LargeBinary value buffer of its group, writes the
// offsets and sizes itself and wraps the buffers with array.NewData (no
// Arrow builder, no reallocation). Buffers come from Config.Allocator,
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
// # Late detection
//
// Once an event is emitted its key leaves the table, so a later fragment
// for it would open a new event. The builder remembers the last LateWindow
// emitted keys exactly (emittedWindow: a ring, a hash set over it and the
// running minimum of the ring). A fragment whose key is not open is late if
// its key is in that set, or below the minimum of the recently emitted keys
// (events are emitted roughly in key order, so it belongs to one emitted
// long ago). Any other key opens a new event, so events delivered out of
// order are still built, and a single corrupt, huge event id cannot make
// later events look late, as it would with a high-water mark.
//
// # Invariants
//
//   - An event is in exactly one of: the table and FIFO (open), the ready
//     queue, a batch being assembled, the free list.
//   - held counts open + ready + assembling events; heldB their bytes.
//   - A slot is cleared when its fragment is copied, before the event
//     returns to the free list.
package builder
