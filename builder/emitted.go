package builder

import "math/bits"

// emittedWindow remembers which keys (event ids or timeslice indices) were
// emitted recently, in bounded memory, for late-fragment detection.
//
// It keeps the last `size` emitted keys exactly (a ring in emission order
// plus a hash set over it) and the minimum of those of them that a quorum
// of sources contributed to (a monotonic deque), the lower edge. A key that
// is not open is late when
//   - it is in the set: emitted recently; or
//   - it is below the lower edge: events are emitted roughly in key order,
//     so such a key belongs to an event emitted long ago (or to none, and
//     then its fragments are stale too).
//
// Anything else opens a new event, so events delivered out of order are
// still built. Nothing is anchored to the highest key ever seen, and an
// event fewer than a quorum of sources sent to (one source's corrupt or
// far-ahead id) never moves the lower edge: one source cannot make every
// later event look late. A corrupt tiny id only lowers the edge for `size`
// emissions, during which detection rests on the set alone.
//
// Each emission costs O(1) amortized; each check one hash probe.
type emittedWindow struct {
	ring []uint64 // emitted keys, oldest at head once full
	head int
	n    int

	// set: open addressing over the keys in ring, with a count per key
	// (a key re-emitted after leaving the set may be in the ring twice).
	keys  []uint64
	cnt   []uint32
	shift uint
	mask  uint64

	// mins: the ring's lower-edge keys (marked with edge) that are smaller
	// than every such key after them, as (emission number, key), oldest
	// first: its head is the lower edge.
	minSeq []uint64
	minKey []uint64
	mHead  int
	mLen   int
	seq    uint64 // emissions so far
}

func newEmittedWindow(size uint64) emittedWindow {
	n := 1 << bits.Len64(2*size-1)
	return emittedWindow{
		ring: make([]uint64, size), keys: make([]uint64, n), cnt: make([]uint32, n),
		shift: uint(64 - bits.TrailingZeros(uint(n))), mask: uint64(n - 1),
		minSeq: make([]uint64, size), minKey: make([]uint64, size),
	}
}

func (w *emittedWindow) home(k uint64) uint64 { return (k * 0x9E3779B97F4A7C15) >> w.shift }

// find returns k's position in the set, or the empty position where it
// would go. The set is never more than half full, so probing terminates.
func (w *emittedWindow) find(k uint64) uint64 {
	i := w.home(k)
	for w.cnt[i] != 0 && w.keys[i] != k {
		i = (i + 1) & w.mask
	}
	return i
}

// late reports whether a fragment for key k, which is not open, is late.
func (w *emittedWindow) late(k uint64) bool {
	if w.n == 0 {
		return false
	}
	return w.cnt[w.find(k)] != 0 || (w.mLen > 0 && k < w.minKey[w.mHead])
}

// has reports whether key k is among the recently emitted keys (the set
// alone, no lower edge).
func (w *emittedWindow) has(k uint64) bool { return w.n > 0 && w.cnt[w.find(k)] != 0 }

// reset forgets every key (a counter reset starts a new key space).
func (w *emittedWindow) reset() {
	clear(w.cnt)
	w.head, w.n, w.mHead, w.mLen = 0, 0, 0, 0
}

// mark records that key k was emitted, forgetting the oldest key when the
// window is full; with edge, k may become the lower edge.
func (w *emittedWindow) mark(k uint64, edge bool) {
	size := len(w.ring)
	if w.n == size {
		w.forget(w.ring[w.head])
		w.ring[w.head] = k
		w.head = (w.head + 1) % size
		// Drop the minimum if it was the forgotten key (emission seq-size).
		if w.mLen > 0 && w.minSeq[w.mHead]+uint64(size) <= w.seq {
			w.mHead = (w.mHead + 1) % size
			w.mLen--
		}
	} else {
		w.ring[(w.head+w.n)%size] = k
		w.n++
	}
	i := w.find(k)
	w.keys[i] = k
	w.cnt[i]++
	if !edge {
		w.seq++
		return
	}
	// Invariant: minKey is increasing from mHead; drop every key >= k at the
	// tail, since k is younger and no larger.
	for w.mLen > 0 && w.minKey[(w.mHead+w.mLen-1)%size] >= k {
		w.mLen--
	}
	t := (w.mHead + w.mLen) % size
	w.minSeq[t], w.minKey[t] = w.seq, k
	w.mLen++
	w.seq++
}

// forget removes one occurrence of k from the set (backward-shift delete).
func (w *emittedWindow) forget(k uint64) {
	i := w.find(k)
	if w.cnt[i] == 0 {
		return
	}
	if w.cnt[i]--; w.cnt[i] > 0 {
		return
	}
	for j := (i + 1) & w.mask; w.cnt[j] != 0; j = (j + 1) & w.mask {
		h := w.home(w.keys[j])
		if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			w.keys[i], w.cnt[i] = w.keys[j], w.cnt[j]
			w.cnt[j] = 0
			i = j
		}
	}
	w.cnt[i] = 0
}
