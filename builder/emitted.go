package builder

// emittedWindow remembers which keys (event ids or timeslice indices) were
// already emitted, in bounded memory, for late-fragment detection.
//
// It holds the highest emitted key hw and a ring bitmap of the window
// (hw-size, hw]: bit k mod size is set when key k was emitted. A fragment's
// key k that is not open is
//   - new when k > hw, or when k is inside the window with its bit clear
//     (an event that was never opened, e.g. delivered out of order);
//   - late when its bit is set (emitted before);
//   - late, without proof, when k <= hw-size: older than the memory. The
//     window (Config.LateWindow) must span more ids than can be in flight.
//
// Advancing hw clears the bits that leave the window, so the cost is
// amortized O(1) per key for dense keys and at most size/64 words per jump.
type emittedWindow struct {
	bits []uint64
	size uint64 // a power of two, in keys
	hw   uint64 // highest emitted key, valid when any
	any  bool   // whether any key was emitted yet
}

func newEmittedWindow(size uint64) emittedWindow {
	s := uint64(64)
	for s < size {
		s <<= 1
	}
	return emittedWindow{bits: make([]uint64, s/64), size: s}
}

// late reports whether key k must be treated as already emitted.
func (w *emittedWindow) late(k uint64) bool {
	if !w.any || k > w.hw {
		return false
	}
	if w.hw-k >= w.size {
		return true
	}
	i := k & (w.size - 1)
	return w.bits[i/64]&(1<<(i%64)) != 0
}

// mark records that key k was emitted.
func (w *emittedWindow) mark(k uint64) {
	switch {
	case !w.any:
		w.any, w.hw = true, k
	case k > w.hw:
		if k-w.hw >= w.size {
			clear(w.bits)
		} else {
			for j := w.hw + 1; j <= k; j++ {
				// Word-at-a-time when aligned: dense keys clear 64 bits per store.
				i := j & (w.size - 1)
				if i%64 == 0 && k-j >= 63 {
					w.bits[i/64] = 0
					j += 63
					continue
				}
				w.bits[i/64] &^= 1 << (i % 64)
			}
		}
		w.hw = k
	case w.hw-k >= w.size:
		return // older than the window: already treated as late
	}
	i := k & (w.size - 1)
	w.bits[i/64] |= 1 << (i % 64)
}
