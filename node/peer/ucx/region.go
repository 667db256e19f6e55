//go:build ucx

package ucx

/*
#include "sluice_ucx.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sluice-daq/sluice/node/peer"
)

// region is memory registered with UCX (ucp_mem_map) that data is sent
// from.
type region struct {
	t        *Transport
	mem      []byte
	owned    bool
	memh     C.ucp_mem_h // worker's; nil once unmapped
	inflight atomic.Int64
	mu       sync.Mutex
	closed   bool
}

var _ peer.Region = (*region)(nil)

// Register registers mem (mmap'd or C memory, never the Go heap) with UCX.
func (t *Transport) Register(mem []byte) (peer.Region, error) {
	if len(mem) == 0 {
		return nil, fmt.Errorf("%w: empty region", peer.ErrConfig)
	}
	return t.addRegion(&region{t: t, mem: mem})
}

// AllocRegion maps and registers n bytes.
func (t *Transport) AllocRegion(n int) (peer.Region, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: region of %d bytes", peer.ErrConfig, n)
	}
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("peer ucx: region of %d bytes: mmap: %w", n, err)
	}
	r, err := t.addRegion(&region{t: t, mem: mem, owned: true})
	if err != nil {
		unix.Munmap(mem)
	}
	return r, err
}

func (t *Transport) addRegion(r *region) (peer.Region, error) {
	t.mu.Lock()
	if t.isClosed {
		t.mu.Unlock()
		return nil, fmt.Errorf("%w: transport %s", peer.ErrClosed, t.addr)
	}
	t.mu.Unlock()
	err := t.do(func() error {
		if st := C.sl_mem_map(t.w.ctx, unsafe.Pointer(unsafe.SliceData(r.mem)), C.size_t(len(r.mem)), &r.memh); st != C.UCS_OK {
			return fmt.Errorf("peer ucx: register %d bytes: %s", len(r.mem), statusErr(st))
		}
		live.memh.Add(1)
		t.mu.Lock()
		t.regions[r] = struct{}{}
		t.mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	t.ctr.Regions.Add(1)
	return r, nil
}

// unmap deregisters (worker).
func (r *region) unmap() {
	if r.memh != nil {
		C.ucp_mem_unmap(r.t.w.ctx, r.memh)
		r.memh = nil
		live.memh.Add(-1)
	}
	if r.owned {
		unix.Munmap(r.mem)
		r.owned = false
	}
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
	t := r.t
	t.mu.Lock()
	_, live := t.regions[r]
	delete(t.regions, r)
	t.mu.Unlock()
	r.closed = true
	if !live {
		return nil // the transport closed first and deregistered it
	}
	t.ctr.Regions.Add(-1)
	if err := t.do(func() error { r.unmap(); return nil }); err != nil {
		return nil // worker gone: it unmapped everything on its way out
	}
	return nil
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
