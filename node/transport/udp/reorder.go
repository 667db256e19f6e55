package udp

import (
	"math"
	"time"

	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/node/transport/internal/rxbuf"
)

// seqWindow puts one UDP sender's datagrams back in sequence order, as
// VLBI_UDP does: a datagram is held while an earlier sequence number is
// missing, for at most the latency budget and at most ReorderWindow
// numbers ahead. A missing number passed over is counted lost; if it
// arrives afterwards it is counted late and dropped.
type seqWindow struct {
	c       *transport.Counters
	next    uint64 // lowest sequence number neither delivered nor declared lost
	highest uint64 // highest sequence number received
	slots   []wslot
	held    int       // datagrams in slots
	due     time.Time // when the oldest held datagram's budget runs out
	lost    []uint64  // bit s%len: s in [next-historyLen, next) was declared lost
	ended   bool      // the end marker arrived
}

type wslot struct {
	b    *rxbuf.Buf
	n    int
	full bool
}

// newSeqWindow starts a window at the first datagram's number, or at 0
// when that number is within the window of 0 (the sender started at 0 and
// its first datagrams were reordered or lost).
func newSeqWindow(size int, first uint64, c *transport.Counters) *seqWindow {
	w := &seqWindow{c: c, slots: make([]wslot, size), highest: first}
	if first >= uint64(size) {
		w.next = first
	}
	w.lost = make([]uint64, (4*size+63)/64)
	return w
}

func (w *seqWindow) historyLen() uint64 { return uint64(len(w.lost)) * 64 }

func (w *seqWindow) setLost(s uint64, v bool) {
	i := s % w.historyLen()
	if v {
		w.lost[i/64] |= 1 << (i % 64)
	} else {
		w.lost[i/64] &^= 1 << (i % 64)
	}
}

func (w *seqWindow) wasLost(s uint64) bool {
	i := s % w.historyLen()
	return w.lost[i/64]&(1<<(i%64)) != 0
}

// add takes datagram seq (n bytes in b) that arrived with budget until due,
// and delivers every datagram that is now in order.
func (w *seqWindow) add(seq uint64, b *rxbuf.Buf, n int, due time.Time, deliver func(*rxbuf.Buf, int) error) error {
	if seq < w.next {
		if w.next-seq > w.historyLen() || w.wasLost(seq) {
			w.c.Discard(transport.Late)
		} else {
			w.c.Discard(transport.Duplicate)
		}
		b.Put()
		return nil
	}
	size := uint64(len(w.slots))
	if seq >= w.next+size {
		if err := w.advance(seq-size+1, deliver); err != nil {
			b.Put()
			return err
		}
	}
	s := &w.slots[seq%size]
	if s.full {
		w.c.Discard(transport.Duplicate)
		b.Put()
		return nil
	}
	*s = wslot{b: b, n: n, full: true}
	if w.held++; w.held == 1 {
		w.due = due
	}
	w.highest = max(w.highest, seq)
	// Invariant: every slot in [next, next+size) holds only its own number.
	for w.held > 0 {
		s := &w.slots[w.next%size]
		if !s.full {
			break
		}
		if err := w.pop(s, deliver); err != nil {
			return err
		}
	}
	return nil
}

// pop delivers slot s, which holds w.next.
func (w *seqWindow) pop(s *wslot, deliver func(*rxbuf.Buf, int) error) error {
	b, n := s.b, s.n
	*s = wslot{}
	w.held--
	w.setLost(w.next, false)
	w.next++
	return deliver(b, n)
}

// advance declares lost, or delivers, every number below to.
func (w *seqWindow) advance(to uint64, deliver func(*rxbuf.Buf, int) error) error {
	size := uint64(len(w.slots))
	for w.next < to {
		if w.held == 0 && to-w.next > size {
			// Nothing held: a jump counts its gap without visiting it.
			gap := to - w.next
			w.c.Lose(gap)
			for s := to - min(gap, w.historyLen()); s < to; s++ {
				w.setLost(s, true)
			}
			w.next = to
			break
		}
		if s := &w.slots[w.next%size]; s.full {
			if err := w.pop(s, deliver); err != nil {
				return err
			}
			continue
		}
		w.c.Lose(1)
		w.setLost(w.next, true)
		w.next++
	}
	return nil
}

// flush delivers everything held, declaring the gaps lost, up to at least
// to (the end marker's count) or past the highest number received.
func (w *seqWindow) flush(to uint64, deliver func(*rxbuf.Buf, int) error) error {
	if w.held > 0 {
		if w.highest == math.MaxUint64 {
			// Past the highest is 0: go up to it, then deliver it (without
			// this it stayed held, never delivered nor counted).
			if err := w.advance(w.highest, deliver); err != nil {
				return err
			}
			if s := &w.slots[w.highest%uint64(len(w.slots))]; s.full && w.next == w.highest {
				return w.pop(s, deliver)
			}
			return nil
		}
		to = max(to, w.highest+1)
	}
	return w.advance(to, deliver)
}
