//go:build ucx

package ucx

/*
#include "sluice_ucx.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/sluice-daq/sluice/node/peer"
	"github.com/sluice-daq/sluice/node/peer/internal/region"
)

// regionHooks register a Region's memory with UCX (ucp_mem_map) on the
// worker, the handle kept in the Region; the worker unregisters what is
// left before it destroys its context (unregisterAll).
func (t *Transport) regionHooks() region.Hooks {
	return region.Hooks{
		Register: func(r *region.Region) error {
			mem := r.Bytes()
			return t.do(func() error {
				var memh C.ucp_mem_h
				if st := C.sl_mem_map(t.w.ctx, unsafe.Pointer(unsafe.SliceData(mem)), C.size_t(len(mem)), &memh); st != C.UCS_OK {
					return fmt.Errorf("peer ucx: register %d bytes: %s", len(mem), statusErr(st))
				}
				live.memh.Add(1)
				r.Handle = unsafe.Pointer(memh)
				return nil
			})
		},
		Unregister: func(r *region.Region) {
			_ = t.do(func() error { t.unmap(r); return nil }) // worker gone: it unmapped everything on its way out
		},
	}
}

// unmap deregisters r from UCX (worker).
func (t *Transport) unmap(r *region.Region) {
	if r.Handle != nil {
		C.ucp_mem_unmap(t.w.ctx, C.ucp_mem_h(r.Handle))
		r.Handle = nil
		live.memh.Add(-1)
	}
}

// Register registers mem (mmap'd or C memory, never the Go heap) with UCX.
func (t *Transport) Register(mem []byte) (peer.Region, error) { return t.regions.Register(mem) }

// AllocRegion maps and registers n bytes.
func (t *Transport) AllocRegion(n int) (peer.Region, error) { return t.regions.Alloc(n) }
