// Package region is the part of a peer transport's Regions that both
// transports share: the set of live Regions, mapping memory for
// AllocRegion, checking that a SendData slice lies in a live Region of the
// transport and counting the sends in flight from it, and closing (busy
// while sends are in flight; the transport's Close forces the rest). A
// transport supplies Hooks for what registration means to it (UCX:
// ucp_mem_map; TCP: nothing).
package region

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sluice-daq/sluice/node/peer"
	"github.com/sluice-daq/sluice/node/peer/internal/link"
)

// Hooks are a transport's registration of a Region's memory.
type Hooks struct {
	// Register makes r's memory sendable before r joins the set (UCX:
	// ucp_mem_map, keeping the handle in r.Handle); nil: nothing to do.
	Register func(r *Region) error
	// Unregister undoes Register when r is closed by its owner (not at the
	// transport's Close: the transport undoes what is left itself); nil:
	// nothing to do.
	Unregister func(r *Region)
}

// Set is a transport's live Regions.
type Set struct {
	name  string // "peer tcp", for messages
	addr  func() string
	ctr   *link.Counters
	hooks Hooks

	mu      sync.Mutex
	regions map[*Region]struct{}
	closed  bool
}

// NewSet makes an empty set; name prefixes messages ("peer tcp"), addr is
// the transport's address for them, ctr counts Regions.
func NewSet(name string, addr func() string, ctr *link.Counters, h Hooks) *Set {
	return &Set{name: name, addr: addr, ctr: ctr, hooks: h, regions: map[*Region]struct{}{}}
}

// Region is memory SendData may send from.
type Region struct {
	set   *Set
	mem   []byte
	owned bool // mapped by Alloc: unmapped when it is released
	// Handle is the transport's registration (UCX: the ucp_mem_h), set by
	// Hooks.Register; nil once unregistered.
	Handle   unsafe.Pointer
	inflight atomic.Int64
	mu       sync.Mutex
	closed   bool
}

var _ peer.Region = (*Region)(nil)

// Register makes mem (mmap'd or C memory, never the Go heap: a transport
// may hand it to C) a Region: peer.Transport's Register.
func (s *Set) Register(mem []byte) (peer.Region, error) {
	if len(mem) == 0 {
		return nil, fmt.Errorf("%w: empty region", peer.ErrConfig)
	}
	return s.add(&Region{set: s, mem: mem})
}

// Alloc maps n bytes of anonymous memory as a Region: peer.Transport's
// AllocRegion.
func (s *Set) Alloc(n int) (peer.Region, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: region of %d bytes", peer.ErrConfig, n)
	}
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("%s: region of %d bytes: mmap: %w", s.name, n, err)
	}
	r, err := s.add(&Region{set: s, mem: mem, owned: true})
	if err != nil {
		unix.Munmap(mem)
	}
	return r, err
}

func (s *Set) add(r *Region) (peer.Region, error) {
	if s.isClosed() {
		return nil, s.closedErr()
	}
	if s.hooks.Register != nil {
		if err := s.hooks.Register(r); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		if s.hooks.Unregister != nil {
			s.hooks.Unregister(r)
		}
		return nil, s.closedErr()
	}
	s.regions[r] = struct{}{}
	s.mu.Unlock()
	s.ctr.Regions.Add(1)
	return r, nil
}

func (s *Set) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *Set) closedErr() error { return fmt.Errorf("%w: transport %s", peer.ErrClosed, s.addr()) }

// Each calls f for every live Region (the UCX worker unregisters them all
// before it destroys its context).
func (s *Set) Each(f func(*Region)) {
	s.mu.Lock()
	rs := make([]*Region, 0, len(s.regions))
	for r := range s.regions {
		rs = append(rs, r)
	}
	s.mu.Unlock()
	for _, r := range rs {
		f(r)
	}
}

// Close is the transport's: no Region can be added any more, and those
// still open (every Conn has ended: no send is in flight) are released.
// The error wraps peer.ErrRegionOpen when there were any: the caller
// should have closed them.
func (s *Set) Close() error {
	s.mu.Lock()
	s.closed = true
	rs := make([]*Region, 0, len(s.regions))
	for r := range s.regions {
		rs = append(rs, r)
	}
	s.mu.Unlock()
	for _, r := range rs {
		r.mu.Lock()
		if !r.closed {
			r.release()
		}
		r.mu.Unlock()
	}
	if len(rs) > 0 {
		return fmt.Errorf("%w: %d regions of transport %s", peer.ErrRegionOpen, len(rs), s.addr())
	}
	return nil
}

// Bytes is the Region's memory.
func (r *Region) Bytes() []byte { return r.mem }

// Slice is n bytes at off; it panics outside the Region (a programming
// error).
func (r *Region) Slice(off, n int) peer.Slice {
	if off < 0 || n < 0 || off+n > len(r.mem) {
		panic(fmt.Sprintf("peer: slice [%d, %d) outside a region of %d bytes", off, off+n, len(r.mem)))
	}
	return peer.Slice{Region: r, Off: off, N: n}
}

// Close deregisters the region; ErrRegionBusy while sends are in flight.
func (r *Region) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	if n := r.inflight.Load(); n > 0 {
		return fmt.Errorf("%w: %d sends", peer.ErrRegionBusy, n)
	}
	s := r.set
	s.mu.Lock()
	_, live := s.regions[r]
	s.mu.Unlock()
	if !live {
		r.closed = true
		return nil // the transport closed first and released it
	}
	if s.hooks.Unregister != nil {
		s.hooks.Unregister(r)
	}
	r.release()
	return nil
}

// release takes r out of its set and unmaps what Alloc mapped (r.mu held).
func (r *Region) release() {
	r.closed = true
	s := r.set
	s.mu.Lock()
	delete(s.regions, r)
	s.mu.Unlock()
	s.ctr.Regions.Add(-1)
	if r.owned {
		unix.Munmap(r.mem)
		r.owned = false
	}
}

// StartSend begins a data send of header and sl on c: it checks them
// against the limits (peer.ErrTooLarge), Acquires sl and waits for one of
// c's send slots. The transport calls Done when the send completed (and
// c's SendDone or CancelSend).
func (s *Set) StartSend(ctx context.Context, c *link.Conn, header []byte, sl peer.Slice) (*Region, error) {
	if len(header) > peer.MaxHeader {
		return nil, fmt.Errorf("%w: data header of %d bytes to %s, limit %d", peer.ErrTooLarge, len(header), c.Node(), peer.MaxHeader)
	}
	if sl.N > c.PeerMaxData() {
		return nil, fmt.Errorf("%w: payload of %d bytes to %s, which takes at most %d", peer.ErrTooLarge, sl.N, c.Node(), c.PeerMaxData())
	}
	r, err := s.Acquire(sl)
	if err != nil {
		return nil, err
	}
	if err := c.AcquireSend(ctx); err != nil {
		r.Done()
		return nil, err
	}
	return r, nil
}

// Acquire checks that sl lies in a live Region of s and counts a send in
// flight from it; the transport calls Done when the send completed.
func (s *Set) Acquire(sl peer.Slice) (*Region, error) {
	r, ok := sl.Region.(*Region)
	if !ok || r == nil || r.set != s {
		return nil, fmt.Errorf("%w: slice of a region of another transport (or none)", peer.ErrNotRegistered)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, fmt.Errorf("%w: region closed", peer.ErrNotRegistered)
	}
	if sl.Off < 0 || sl.N < 0 || sl.Off+sl.N > len(r.mem) {
		return nil, fmt.Errorf("%w: slice [%d, %d) outside a region of %d bytes", peer.ErrNotRegistered, sl.Off, sl.Off+sl.N, len(r.mem))
	}
	r.inflight.Add(1)
	return r, nil
}

// Done ends a send that Acquire counted.
func (r *Region) Done() { r.inflight.Add(-1) }
