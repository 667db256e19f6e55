package tcp

import (
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/sluice-daq/sluice/node/peer"
)

// region is memory SendData may send from. TCP needs no registration with
// the kernel; the bookkeeping is the same as UCX's so callers behave alike.
type region struct {
	t        *Transport
	mem      []byte
	owned    bool // mmap'd by AllocRegion: unmapped on Close
	inflight atomic.Int64
	mu       sync.Mutex
	closed   bool
}

var _ peer.Region = (*region)(nil)

// Register makes mem a Region.
func (t *Transport) Register(mem []byte) (peer.Region, error) {
	if len(mem) == 0 {
		return nil, fmt.Errorf("%w: empty region", peer.ErrConfig)
	}
	return t.addRegion(&region{t: t, mem: mem})
}

// AllocRegion maps n bytes of anonymous memory as a Region.
func (t *Transport) AllocRegion(n int) (peer.Region, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: region of %d bytes", peer.ErrConfig, n)
	}
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("peer tcp: region of %d bytes: mmap: %w", n, err)
	}
	r, err := t.addRegion(&region{t: t, mem: mem, owned: true})
	if err != nil {
		unix.Munmap(mem)
	}
	return r, err
}

func (t *Transport) addRegion(r *region) (peer.Region, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.isClosed {
		return nil, fmt.Errorf("%w: transport %s", peer.ErrClosed, t.addr)
	}
	t.regions[r] = struct{}{}
	t.ctr.Regions.Add(1)
	return r, nil
}

func (r *region) Bytes() []byte { return r.mem }

func (r *region) Slice(off, n int) peer.Slice {
	if off < 0 || n < 0 || off+n > len(r.mem) {
		panic(fmt.Sprintf("peer: slice [%d, %d) outside a region of %d bytes", off, off+n, len(r.mem)))
	}
	return peer.Slice{Region: r, Off: off, N: n}
}

// Close deregisters the region; ErrRegionBusy while sends are in flight.
func (r *region) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	if n := r.inflight.Load(); n > 0 {
		return fmt.Errorf("%w: %d sends", peer.ErrRegionBusy, n)
	}
	r.release()
	return nil
}

// forceClose is the transport's Close: every Conn has ended, so no send is
// in flight any more.
func (r *region) forceClose() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.release()
	}
}

func (r *region) release() {
	r.closed = true
	r.t.mu.Lock()
	delete(r.t.regions, r)
	r.t.mu.Unlock()
	r.t.ctr.Regions.Add(-1)
	if r.owned {
		unix.Munmap(r.mem)
	}
}

// acquire checks that s lies in a live region of t and counts a send in
// flight from it.
func (t *Transport) acquire(s peer.Slice) (*region, error) {
	r, ok := s.Region.(*region)
	if !ok || r == nil || r.t != t {
		return nil, fmt.Errorf("%w: slice of a region of another transport (or none)", peer.ErrNotRegistered)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, fmt.Errorf("%w: region closed", peer.ErrNotRegistered)
	}
	if s.Off < 0 || s.N < 0 || s.Off+s.N > len(r.mem) {
		return nil, fmt.Errorf("%w: slice [%d, %d) outside a region of %d bytes", peer.ErrNotRegistered, s.Off, s.Off+s.N, len(r.mem))
	}
	r.inflight.Add(1)
	return r, nil
}
