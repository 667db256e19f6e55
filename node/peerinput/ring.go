package peerinput

import (
	"context"
	"fmt"
	"sync"

	"github.com/sluice-daq/sluice/node/peer"
	"github.com/sluice-daq/sluice/node/transport"
)

// ring hands out the sender's registered memory in order: packets are
// placed one after another, wrapping at the end, and their space comes
// back once their send and every earlier one completed.
type ring struct {
	r    peer.Region
	mu   sync.Mutex
	wake chan struct{} // closed and replaced when space comes back
	// head: where the next packet goes; used: the spans in flight, oldest
	// first.
	head int
	used []span
	err  error // the first failed send: the stream is broken
}

type span struct {
	off, n, skip int // skip: bytes left unused at the end before off wrapped to 0
	done         bool
}

func newRing(r peer.Region) *ring { return &ring{r: r, wake: make(chan struct{})} }

func (g *ring) size() int { return len(g.r.Bytes()) }

// inUse is the bytes taken by spans in flight (with their skips).
func (g *ring) inUse() int {
	n := 0
	for _, s := range g.used {
		n += s.n + s.skip
	}
	return n
}

// alloc waits for n contiguous bytes and returns their offset.
func (g *ring) alloc(ctx context.Context, n int) (int, error) {
	if n > g.size() {
		return 0, fmt.Errorf("%w: a packet of %d bytes, the send ring has %d", transport.ErrPacketTooLarge, n, g.size())
	}
	for {
		g.mu.Lock()
		if g.err != nil {
			err := g.err
			g.mu.Unlock()
			return 0, err
		}
		off, skip := g.head, 0
		if off+n > g.size() {
			off, skip = 0, g.size()-g.head
		}
		if g.inUse()+skip+n <= g.size() {
			g.used = append(g.used, span{off: off, n: n, skip: skip})
			g.head = (off + n) % g.size()
			g.mu.Unlock()
			return off, nil
		}
		wake := g.wake
		g.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// free marks the span at off done and gives back the completed prefix.
func (g *ring) free(off int, err error) {
	g.mu.Lock()
	if err != nil && g.err == nil {
		g.err = err
	}
	for i := range g.used {
		if g.used[i].off == off && !g.used[i].done {
			g.used[i].done = true
			break
		}
	}
	k := 0
	for k < len(g.used) && g.used[k].done {
		k++
	}
	g.used = g.used[k:]
	if len(g.used) == 0 {
		g.head = 0
	}
	close(g.wake)
	g.wake = make(chan struct{})
	g.mu.Unlock()
}

// drain waits until nothing is in flight and closes the region; it returns
// the first send error.
func (g *ring) drain(ctx context.Context) error {
	for {
		g.mu.Lock()
		if len(g.used) == 0 {
			err := g.err
			g.mu.Unlock()
			if e := g.r.Close(); err == nil {
				err = e
			}
			return err
		}
		wake := g.wake
		g.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
