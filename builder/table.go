package builder

import "math/bits"

// eventTable maps the key (event id or timeslice index, and its epoch: the
// counter resets before it) of every open event to its state. It is an open-addressing hash table with linear probing and
// backward-shift deletion, sized at New to at least twice MaxOpenEvents so
// that its load stays <= 1/2 and it never grows: the per-fragment lookup is a
// multiply, a shift and (almost always) one compare, with no allocation.
type eventTable struct {
	slots []*event
	shift uint // 64 - log2(len(slots))
	mask  uint64
}

func newEventTable(maxOpen int) eventTable {
	n := 1 << bits.Len(uint(2*maxOpen-1))
	n = max(n, 16)
	return eventTable{slots: make([]*event, n), shift: uint(64 - bits.TrailingZeros(uint(n))), mask: uint64(n - 1)}
}

// home is Fibonacci hashing: consecutive keys, the common case, land in
// distinct, well spread slots.
func (t *eventTable) home(key uint64) uint64 { return (key * 0x9E3779B97F4A7C15) >> t.shift }

// get returns the open event of key in epoch ep, or nil. Events of one key
// in two epochs share a probe chain.
func (t *eventTable) get(key uint64, ep uint32) *event {
	// Invariant: the table is never full, so probing ends at an empty slot.
	for i := t.home(key); ; i = (i + 1) & t.mask {
		e := t.slots[i]
		if e == nil || (e.key == key && e.epoch == ep) {
			return e
		}
	}
}

// put inserts e; its key and epoch must not be present.
func (t *eventTable) put(e *event) {
	i := t.home(e.key)
	for t.slots[i] != nil {
		i = (i + 1) & t.mask
	}
	t.slots[i] = e
}

// remove deletes ev's entry, shifting later entries of the probe chain
// back so that lookups never need tombstones.
func (t *eventTable) remove(ev *event) {
	i := t.home(ev.key)
	for t.slots[i] != nil && t.slots[i] != ev {
		i = (i + 1) & t.mask
	}
	if t.slots[i] == nil {
		return
	}
	for j := (i + 1) & t.mask; t.slots[j] != nil; j = (j + 1) & t.mask {
		h := t.home(t.slots[j].key)
		// Move slots[j] into the hole at i unless its home lies cyclically
		// in (i, j], where it can still be found without crossing i.
		if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = nil
}
