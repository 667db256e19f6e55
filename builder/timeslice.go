package builder

import (
	"math/bits"
	"time"

	"github.com/sluice-daq/sluice/schemas"
)

// Timeslice mode (CBM FLES style). A fragment's EventID is its timestamp t
// in ns. Its core timeslice is k = t / SliceDuration; when t lies within
// Overlap after the start of k (t - k*SliceDuration < Overlap, k > 0), the
// same bytes are also placed in timeslice k-1, as part of k-1's overlap: a
// reference, not a copy, until batch assembly. The ledger counts the
// fragment once, in k. When k-1 was already emitted no copy is made
// (counted in Ledger.OverlapLate); when k itself was, the fragment is late.
//
// A timeslice is complete when every source has put at least one fragment
// in its core AND every source has sent a fragment with a timestamp at or
// past the end of the slice's overlap ((k+1)*SliceDuration + Overlap): each
// source sends in time order, so after that it has nothing more for k. The
// minimum of the per-source high timestamps is kept incrementally. Without
// the second condition the first fragment of the slowest source would close
// the slice and cut off everything the others still had for it. A slice
// that does not complete is emitted at its timeout (or Flush); it is
// flagged StatusIncomplete only when some source has no core fragment.

// sliceDone reports whether every source has moved past timeslice k and its
// overlap. A slice end beyond 2^64 ns is never passed (timeout only).
func (b *Builder) sliceDone(k uint64) bool {
	hi, end := bits.Mul64(k+1, b.slice)
	end, carry := bits.Add64(end, b.overlap, 0)
	return hi == 0 && carry == 0 && k+1 != 0 && b.minWM >= end
}

// placeSliceLocked places one fragment in its core timeslice and, inside
// the overlap, in the previous one. Like placeEventLocked it changes nothing
// and returns false when the placements do not fit yet.
func (b *Builder) placeSliceLocked(src int32, t uint64, flags schemas.FragmentFlag, payload []byte, crc uint32, ref *pktRef, now *time.Time) bool {
	k := t / b.slice
	core := b.table.get(k, 0)
	if core == nil && b.emitted.late(k) {
		// The core is gone: the fragment is late, and no overlap copy is
		// made either, so that it never shows up in a batch uncounted.
		b.lateLocked(k, 0, src)
		b.discardLocked(rLate, ref)
		return true
	}
	var prev *event
	wantPrev := k > 0 && t-k*b.slice < b.overlap
	if wantPrev {
		prev = b.table.get(k-1, 0)
		if prev == nil && b.emitted.late(k-1) {
			wantPrev = false
			b.led.OverlapLate++
		}
	}
	newEvents, places := 0, 1
	if core == nil {
		newEvents++
	}
	if wantPrev {
		places++
		if prev == nil {
			newEvents++
		}
	}
	if !b.roomLocked(newEvents, int64(places*len(payload))) {
		return false
	}
	if core == nil {
		core = b.openLocked(k, 0, now)
	}
	b.led.FragmentsOpen++
	b.appendSliceLocked(core, src, t, flags, payload, crc, ref, true)
	if wantPrev {
		if prev == nil {
			prev = b.openLocked(k-1, 0, now)
		}
		if ref != nil {
			ref.n.Add(1)
		}
		b.led.OverlapCopies++
		b.appendSliceLocked(prev, src, t, flags, payload, crc, ref, false)
	}
	b.advanceLocked(src, t)
	// advanceLocked may already have emitted either slice.
	if core.open && core.present == b.nsrc && b.sliceDone(k) {
		b.emitLocked(core)
	}
	if prev != nil && prev.open && prev.present == b.nsrc && b.sliceDone(k-1) {
		b.emitLocked(prev)
	}
	return true
}

func (b *Builder) appendSliceLocked(ev *event, src int32, t uint64, flags schemas.FragmentFlag, payload []byte, crc uint32, ref *pktRef, core bool) {
	b.seq++
	ev.tsFrags = append(ev.tsFrags, tsFrag{payload: payload, ref: ref, ts: t, seq: b.seq, src: src, crc: crc, core: core})
	if core {
		ev.frags++
		if ev.coreN[src] == 0 {
			ev.present++
		}
		ev.coreN[src]++
	}
	if flags&(schemas.FlagSourceError|schemas.FlagTruncated) != 0 {
		ev.status |= schemas.StatusSourceError
	}
	ev.bytes += int64(len(payload))
	b.heldB += int64(len(payload))
	ev.gbytes[b.grp[src]] += int64(len(payload))
}

// advanceLocked raises src's high timestamp to t and, when that raises the
// minimum over all sources, emits the open timeslices that became complete.
// The minimum is recomputed (O(sources)) only when the last source sitting
// at it moves on, i.e. about once per round of all sources.
func (b *Builder) advanceLocked(src int32, t uint64) {
	old := b.wm[src]
	if t <= old {
		return
	}
	b.wm[src] = t
	if old != b.minWM {
		return
	}
	if b.atMin--; b.atMin > 0 {
		return
	}
	b.minWM, b.atMin = b.wm[0], 0
	for _, w := range b.wm {
		switch {
		case w < b.minWM:
			b.minWM, b.atMin = w, 1
		case w == b.minWM:
			b.atMin++
		}
	}
	for ev := b.head; ev != nil; {
		next := ev.next
		if ev.present == b.nsrc && b.sliceDone(ev.key) {
			b.emitLocked(ev)
		}
		ev = next
	}
}
