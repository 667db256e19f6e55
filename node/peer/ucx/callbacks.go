//go:build ucx

package ucx

/*
#include "sluice_ucx.h"
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"unsafe"

	"github.com/sluice-daq/sluice/node/peer"
)

// The callbacks UCX makes (through sluice_ucx.c) while the worker goroutine
// is inside ucp_worker_progress or another ucp call: they run on that
// goroutine, so the worker state needs no locks.

func transportOf(h C.uintptr_t) *Transport { return cgo.Handle(h).Value().(*Transport) }

//export goAmCtl
func goAmCtl(h C.uintptr_t, ep C.ucp_ep_h, data unsafe.Pointer, n C.size_t, rndv C.int) C.ucs_status_t {
	t := transportOf(h)
	if rndv != 0 || ep == nil {
		return C.UCS_ERR_INVALID_PARAM // control frames are eager and carry their endpoint
	}
	t.onCtl(ep, C.GoBytes(data, C.int(n)))
	return C.UCS_OK
}

//export goAmData
func goAmData(h C.uintptr_t, ep C.ucp_ep_h, hdr unsafe.Pointer, hlen C.size_t, data unsafe.Pointer, n C.size_t, rndv C.int) C.ucs_status_t {
	t := transportOf(h)
	if ep == nil {
		return C.UCS_ERR_INVALID_PARAM
	}
	var header []byte
	if hlen > 0 {
		header = unsafe.Slice((*byte)(hdr), int(hlen))
	}
	return t.onData(ep, header, data, int(n), rndv != 0)
}

//export goSendDone
func goSendDone(h C.uintptr_t, id C.uint64_t, st C.ucs_status_t) {
	t := transportOf(h)
	r, ok := t.takeReq(uint64(id)).(*sendReq)
	if !ok {
		return
	}
	if st == C.UCS_OK {
		r.complete(nil)
		return
	}
	err := r.c.Err()
	if err == nil {
		err = fmt.Errorf("%w: %s: send: %s", peer.ErrPeerLost, r.c.Node(), statusErr(st))
	}
	r.complete(err)
}

//export goRecvDone
func goRecvDone(h C.uintptr_t, id C.uint64_t, st C.ucs_status_t, n C.size_t) {
	t := transportOf(h)
	r, ok := t.takeReq(uint64(id)).(*rx)
	if !ok {
		return
	}
	if st != C.UCS_OK || int(n) != r.n {
		t.recvFailed(r, st)
		return
	}
	r.done = true
	t.deliverReady(r.c)
}

//export goCloseDone
func goCloseDone(h C.uintptr_t, id C.uint64_t, st C.ucs_status_t) {
	t := transportOf(h)
	if r, ok := t.takeReq(uint64(id)).(*closeReq); ok {
		t.closing--
		t.forgetEP(r.ep)
	}
}

//export goEpError
func goEpError(h C.uintptr_t, ep C.ucp_ep_h, st C.ucs_status_t) {
	transportOf(h).onEpError(ep, st)
}

//export goConnRequest
func goConnRequest(h C.uintptr_t, req C.ucp_conn_request_h) {
	transportOf(h).onConnRequest(req)
}
