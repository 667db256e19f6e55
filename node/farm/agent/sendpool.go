package agent

import (
	"context"
	"fmt"
	"math/bits"
	"sync"

	"github.com/sluice-daq/sluice/node/peer"
)

// sendPool hands out registered memory for the RU's data messages, in
// power-of-two slots from 64 KiB, kept for reuse (mapping a region per
// message would cost a system call each way). Its bytes are bounded: get
// waits while the slots in flight would pass the limit, so a slow BU
// throttles its RUs instead of growing their memory.
type sendPool struct {
	t     peer.Transport
	limit int

	mu    sync.Mutex
	cv    *sync.Cond
	free  map[int][]*slot
	inUse int
	peak  int
	all   []*slot
	done  bool
}

type slot struct {
	region peer.Region
	size   int
}

const minSlot = 64 << 10

func newSendPool(t peer.Transport, limit int) *sendPool {
	p := &sendPool{t: t, limit: limit, free: map[int][]*slot{}}
	p.cv = sync.NewCond(&p.mu)
	return p
}

func slotSize(n int) int {
	if n <= minSlot {
		return minSlot
	}
	return 1 << bits.Len(uint(n-1))
}

// get returns a slot of at least n bytes.
func (p *sendPool) get(ctx context.Context, n int) (*slot, error) {
	size := slotSize(n)
	if size > p.limit {
		return nil, fmt.Errorf("agent: a %d-byte data message exceeds the send pool (%d bytes)", n, p.limit)
	}
	stop := context.AfterFunc(ctx, func() { p.mu.Lock(); p.cv.Broadcast(); p.mu.Unlock() })
	defer stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.inUse+size > p.limit && !p.done {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		p.cv.Wait()
	}
	if p.done {
		return nil, fmt.Errorf("agent: send pool closed")
	}
	p.inUse += size
	p.peak = max(p.peak, p.inUse)
	if l := p.free[size]; len(l) > 0 {
		s := l[len(l)-1]
		p.free[size] = l[:len(l)-1]
		return s, nil
	}
	r, err := p.t.AllocRegion(size)
	if err != nil {
		p.inUse -= size
		return nil, err
	}
	s := &slot{region: r, size: size}
	p.all = append(p.all, s)
	return s, nil
}

func (p *sendPool) put(s *slot) {
	p.mu.Lock()
	p.inUse -= s.size
	p.free[s.size] = append(p.free[s.size], s)
	p.mu.Unlock()
	p.cv.Broadcast()
}

// status is the bytes in use, their peak and the limit.
func (p *sendPool) status() PoolStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return PoolStatus{UsedBytes: int64(p.inUse), PeakBytes: int64(p.peak), LimitBytes: int64(p.limit)}
}

// close frees the regions (sends must have completed: the transport's
// connections are closed first).
func (p *sendPool) close() {
	p.mu.Lock()
	p.done = true
	all := p.all
	p.all = nil
	p.mu.Unlock()
	p.cv.Broadcast()
	for _, s := range all {
		s.region.Close()
	}
}
