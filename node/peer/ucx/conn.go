//go:build ucx

package ucx

/*
#include <stdlib.h>
#include <string.h>
#include "sluice_ucx.h"
*/
import "C"

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/sluice-daq/sluice/node/peer"
	"github.com/sluice-daq/sluice/node/peer/internal/handshake"
	"github.com/sluice-daq/sluice/node/peer/internal/link"
	"github.com/sluice-daq/sluice/node/peer/internal/pool"
	"github.com/sluice-daq/sluice/node/peer/internal/region"
	"github.com/sluice-daq/sluice/node/peer/internal/wire"
)

const (
	stateHandshake = iota
	stateEstablished
	stateEnded
)

// Conn is a UCX peer connection: one endpoint.
type Conn struct {
	*link.Conn // set when the hello exchange succeeded
	t          *Transport

	// Handshake: frames of kinds 1-5 go to hs; anything else that comes
	// before the Conn is established waits in early.
	hs    chan hsFrame
	hsErr chan error

	// Control-path frames queued for the worker, which sends what has
	// gathered as one active message.
	cmu     sync.Mutex
	cbuf    []byte
	cqueued bool

	// Worker state.
	ep      C.ucp_ep_h
	state   int
	epDead  bool      // UCX reported the endpoint failed, or we closed it
	dialed  bool      // we connected (rather than accepted) this endpoint
	heard   bool      // a frame came from the peer
	closeAt time.Time // after our bye or bye_ack: force the close by then
	early   []early
	rxq     []*rx // data messages of this Conn in arrival order
}

var _ peer.Conn = (*Conn)(nil)

type hsFrame struct {
	h    wire.Header
	body []byte
}

type early struct {
	h    wire.Header
	body []byte
}

// rx is one data message being received.
type rx struct {
	c      *Conn
	header []byte
	desc   unsafe.Pointer // UCX's rendezvous descriptor until the receive starts
	n      int
	slot   *pool.Slot
	done   bool // payload complete in slot
	failed bool // receive failed: slot already released
	waited bool
}

// sendReq is one data send in flight.
type sendReq struct {
	c    *Conn
	r    *region.Region
	n    int
	done func(error)
}

func (s *sendReq) complete(err error) {
	s.r.Done()
	s.c.SendDone(s.n, err)
	s.done(err)
}

// closeReq is an endpoint being closed.
type closeReq struct{ ep C.ucp_ep_h }

func (t *Transport) newConn(ep C.ucp_ep_h) *Conn {
	c := &Conn{t: t, ep: ep, hs: make(chan hsFrame, 4), hsErr: make(chan error, 1)}
	t.eps[ep] = c
	live.endpoints.Add(1)
	return c
}

// abortHandshake ends a handshake in progress with err (worker).
func (c *Conn) abortHandshake(err error) {
	select {
	case c.hsErr <- err:
	default:
	}
}

// hsIO is the handshake's FrameIO over the endpoint.
type hsIO struct {
	c        *Conn
	deadline time.Time
}

func (h hsIO) WriteFrame(b []byte) error {
	return h.c.queue(func(buf []byte) []byte { return append(buf, b...) })
}

func (h hsIO) ReadFrame() (wire.Header, []byte, error) {
	tm := time.NewTimer(time.Until(h.deadline))
	defer tm.Stop()
	select {
	case f := <-h.c.hs:
		return f.h, f.body, nil
	case err := <-h.c.hsErr:
		return wire.Header{}, nil, err
	case <-tm.C:
		return wire.Header{}, nil, fmt.Errorf("peer ucx: hello exchange timed out")
	}
}

// Connect creates an endpoint to addr and runs the hello exchange.
func (t *Transport) Connect(ctx context.Context, addr string) (peer.Conn, error) {
	host, port, err := splitAddr(addr)
	if err != nil {
		return nil, fmt.Errorf("peer ucx: connect %s: %w", addr, err)
	}
	var c *Conn
	err = t.do(func() error {
		if t.stopping {
			return fmt.Errorf("%w: transport %s", peer.ErrClosed, t.addr)
		}
		ch := C.CString(host)
		defer C.free(unsafe.Pointer(ch))
		var ep C.ucp_ep_h
		if st := C.sl_ep_connect(t.w.worker, ch, C.int(port), C.uintptr_t(t.handle), &ep); st != C.UCS_OK {
			return fmt.Errorf("peer ucx: connect %s: %s", addr, statusErr(st))
		}
		c = t.newConn(ep)
		c.dialed = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(t.cfg.HandshakeTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	stop := context.AfterFunc(ctx, func() { c.abortHandshake(ctx.Err()) })
	p, err := handshake.Connect(hsIO{c: c, deadline: deadline}, &t.cfg, &t.ctr)
	stop()
	if err != nil {
		t.ops.push(func() { t.closeEP(c, false) })
		return nil, fmt.Errorf("peer ucx: connect %s: %w", addr, err)
	}
	if err := t.establish(c, p); err != nil {
		return nil, err
	}
	t.ctr.Connected.Add(1)
	return c, nil
}

// onConnRequest accepts an endpoint and runs the acceptor's handshake in a
// goroutine (worker).
func (t *Transport) onConnRequest(req C.ucp_conn_request_h) {
	if t.stopping || t.listener == nil {
		C.ucp_listener_reject(t.listener, req)
		return
	}
	var ep C.ucp_ep_h
	if st := C.sl_ep_accept(t.w.worker, req, C.uintptr_t(t.handle), &ep); st != C.UCS_OK {
		t.ctr.CountRefused(peer.RefusedMalformed)
		return
	}
	c := t.newConn(ep)
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		t.acceptHandshake(c)
	}()
}

func (t *Transport) acceptHandshake(c *Conn) {
	fio := hsIO{c: c, deadline: time.Now().Add(t.cfg.HandshakeTimeout)}
	h, body, err := fio.ReadFrame()
	if err == nil && h.Kind != wire.KindHello {
		err = fmt.Errorf("%w: first frame of kind %d, want hello", peer.ErrProtocol, h.Kind)
	}
	if err != nil {
		t.ctr.CountRefused(peer.RefusedMalformed)
		t.ops.push(func() { t.closeEP(c, false) })
		return
	}
	place := t.reg.Reservation()
	p, err := handshake.Accept(fio, body, &t.cfg, &t.ctr, handshake.NewCookie(), place.Reserve, place.Unreserve)
	if err != nil {
		t.ops.push(func() { t.closeEP(c, false) })
		return
	}
	if err := t.establish(c, p); err != nil {
		place.Unreserve()
		return
	}
	place.Push(c)
}

// establish gives c its link and replays what came early.
func (t *Transport) establish(c *Conn, p handshake.Peer) error {
	c.Conn = link.New(p.Link(&t.cfg, &t.ctr, func() { t.reg.Remove(c) }), c)
	if !t.reg.Add(c, nil) {
		t.ops.push(func() { t.closeEP(c, true) })
		return fmt.Errorf("%w: transport %s", peer.ErrClosed, t.addr)
	}
	err := t.do(func() error {
		if c.epDead || c.state != stateHandshake {
			return fmt.Errorf("%w: %s: endpoint failed during the hello", peer.ErrPeerLost, p.Node)
		}
		c.state = stateEstablished
		c.Touch()
		for _, e := range c.early {
			if !t.dispatch(c, e.h, e.body) {
				break
			}
		}
		c.early = nil
		t.deliverReady(c)
		return nil
	})
	if err != nil {
		c.Fail(err, peer.LostReset)
	}
	return err
}

// queue appends a frame (by add) to the Conn's pending control-path
// frames and, if they were empty, asks the worker to send them: frames
// queued meanwhile travel together in one active message.
func (c *Conn) queue(add func([]byte) []byte) error {
	c.cmu.Lock()
	c.cbuf = add(c.cbuf)
	first := !c.cqueued
	c.cqueued = true
	c.cmu.Unlock()
	if first && !c.t.ops.push(func() { c.t.flushFrames(c) }) {
		return fmt.Errorf("%w: transport %s", peer.ErrClosed, c.t.addr)
	}
	return nil
}

// Control is link.Wire's: the frame goes out in an eager active message.
func (c *Conn) Control(typ uint16, body []byte) error {
	return c.queue(func(b []byte) []byte { return wire.AppendFrame(b, wire.KindControl, typ, body) })
}

// Credit is link.Wire's.
func (c *Conn) Credit(n uint32) {
	c.queue(func(b []byte) []byte { return wire.AppendCredit(b, n) })
}

// Heartbeat is link.Wire's.
func (c *Conn) Heartbeat() {
	c.queue(func(b []byte) []byte { return wire.AppendFrame(b, wire.KindHeartbeat, 0, nil) })
}

// maxBatch bounds the frames one control active message carries.
const maxBatch = 128 << 10

// flushFrames sends the Conn's pending frames (worker), in active
// messages of at most maxBatch bytes (or one frame), cut at frame ends.
func (t *Transport) flushFrames(c *Conn) {
	c.cmu.Lock()
	buf := c.cbuf
	c.cbuf, c.cqueued = nil, false
	c.cmu.Unlock()
	for len(buf) > 0 {
		n := 0
		for n < len(buf) {
			l := wire.HeaderSize + int(binary.LittleEndian.Uint32(buf[n+4:]))
			if n > 0 && n+l > maxBatch {
				break
			}
			n += l
		}
		t.sendFrame(c, buf[:n])
		buf = buf[n:]
	}
}

// Frame is link.Wire's.
func (c *Conn) Frame(f []byte) {
	c.queue(func(b []byte) []byte { return append(b, f...) })
}

// Shutdown is link.Wire's.
func (c *Conn) Shutdown(flush bool, err error) {
	if !c.t.ops.push(func() { c.t.shutdown(c, flush, err) }) {
		return
	}
}

// sendFrame sends one control-path frame (worker). Its C copy is freed by
// the C side when UCX is done with it.
func (t *Transport) sendFrame(c *Conn, f []byte) {
	if c.epDead || t.w.worker == nil {
		return
	}
	buf := C.CBytes(f)
	C.sl_send_ctl(c.ep, buf, C.size_t(len(f)), C.uintptr_t(t.handle), 0)
	// Errors surface as an endpoint error; completions of id 0 are ignored.
}

// SendData queues one data message; see peer.Conn.
func (c *Conn) SendData(ctx context.Context, header []byte, s peer.Slice, done func(error)) error {
	r, err := c.t.regions.StartSend(ctx, c.Conn, header, s)
	if err != nil {
		return err
	}
	hlen := wire.HeaderSize + len(header)
	hdr := C.malloc(C.size_t(hlen))
	hb := unsafe.Slice((*byte)(hdr), hlen)
	wire.PutHeader(hb, wire.Header{Kind: wire.KindData, Type: uint16(len(header)), Length: uint32(s.N)})
	copy(hb[wire.HeaderSize:], header)
	payload := unsafe.Pointer(unsafe.SliceData(r.Bytes()[s.Off:]))
	sr := &sendReq{c: c, r: r, n: s.N, done: done}
	t := c.t
	ok := t.ops.push(func() {
		if c.state != stateEstablished || c.epDead || t.w.worker == nil {
			C.free(hdr)
			sr.complete(c.endErr())
			return
		}
		id := t.newReq(sr)
		st := C.sl_send_data(c.ep, hdr, C.size_t(hlen), payload, C.size_t(s.N), C.ucp_mem_h(r.Handle), C.uintptr_t(t.handle), C.uint64_t(id))
		switch st {
		case C.UCS_INPROGRESS:
		case C.UCS_OK:
			t.takeReq(id)
			sr.complete(nil)
		default:
			t.takeReq(id)
			sr.complete(fmt.Errorf("%w: %s: send: %s", peer.ErrPeerLost, c.Node(), statusErr(st)))
		}
	})
	if !ok {
		C.free(hdr)
		r.Done()
		c.CancelSend()
		return fmt.Errorf("%w: transport %s", peer.ErrClosed, t.addr)
	}
	return nil
}

// endErr is the error a send of an ended Conn completes with.
func (c *Conn) endErr() error {
	if err := c.Err(); err != nil {
		return err
	}
	return fmt.Errorf("%w: conn to %s", peer.ErrClosed, c.Node())
}

// shutdown is the worker's half of link's Shutdown.
func (t *Transport) shutdown(c *Conn, flush bool, err error) {
	if c.state == stateEnded {
		return
	}
	c.state = stateEnded
	t.dropReceives(c)
	if flush && !c.epDead && t.w.worker != nil {
		// Our bye (or bye_ack) goes out; unless the peer answered our bye
		// already (nothing more to wait for), give it byeGrace to take
		// what is in flight and answer or close its side: its answer,
		// its close (an endpoint error here) or the deadline closes ours.
		t.flushFrames(c)
		if !c.Acked() {
			c.closeAt = time.Now().Add(byeGrace)
			return
		}
	}
	t.closeEP(c, true)
}

// dropReceives frees what c's data messages hold (worker): descriptors not
// yet received are released, complete but undelivered payloads freed;
// receives under way free their slots when UCX fails them.
func (t *Transport) dropReceives(c *Conn) {
	keep := t.pending[:0]
	for _, rx := range t.pending {
		if rx.c == c {
			C.ucp_am_data_release(t.w.worker, rx.desc)
			t.ctr.DataTruncated.Add(1)
			continue
		}
		keep = append(keep, rx)
	}
	for i := len(keep); i < len(t.pending); i++ {
		t.pending[i] = nil
	}
	t.pending = keep
	t.waiting.Store(int64(len(t.pending)))
	rest := c.rxq[:0]
	for _, rx := range c.rxq {
		switch {
		case rx.done:
			rx.slot.Release()
			t.ctr.DataTruncated.Add(1)
		case rx.slot != nil && !rx.failed:
			rest = append(rest, rx) // under way
		}
	}
	c.rxq = rest
	t.slotFreed.Store(true)
}

// closeEP closes c's endpoint once (worker).
func (t *Transport) closeEP(c *Conn, force bool) {
	if c.ep == nil {
		return
	}
	if c.state == stateHandshake {
		c.abortHandshake(fmt.Errorf("%w: endpoint closed", peer.ErrClosed))
	}
	c.state = stateEnded
	c.closeAt = time.Time{}
	t.dropReceives(c)
	ep := c.ep
	c.ep = nil
	c.epDead = true
	if t.w.worker == nil {
		return
	}
	id := t.newReq(&closeReq{ep: ep})
	f := C.int(0)
	if force {
		f = 1
	}
	switch C.sl_ep_close(ep, f, C.uintptr_t(t.handle), C.uint64_t(id)) {
	case C.UCS_INPROGRESS:
		t.closing++
	default:
		t.takeReq(id)
		t.forgetEP(ep)
	}
}

func (t *Transport) forgetEP(ep C.ucp_ep_h) {
	if _, ok := t.eps[ep]; ok {
		delete(t.eps, ep)
		live.endpoints.Add(-1)
	}
}

// forceCloseAll ends every endpoint still open (worker, transport closing).
func (t *Transport) forceCloseAll() {
	for _, c := range t.eps {
		if c.ep != nil {
			if c.Conn != nil {
				c.Fail(fmt.Errorf("%w: transport %s", peer.ErrClosed, t.addr), "")
			}
			t.closeEP(c, true)
		}
	}
}

// dispatch handles one control-path frame of an established Conn (worker);
// false if the Conn ended.
func (t *Transport) dispatch(c *Conn, h wire.Header, body []byte) bool {
	if err := c.DeliverFrame(h, body); err != nil {
		reason := peer.LostReset
		if errors.Is(err, peer.ErrProtocol) {
			reason = peer.LostProtocol
		}
		c.Fail(fmt.Errorf("%w: %s: %w", peer.ErrPeerLost, c.Node(), err), reason)
		return false
	}
	return c.Err() == nil
}

// onCtl handles a control-path active message (worker).
func (t *Transport) onCtl(ep C.ucp_ep_h, data []byte) {
	c := t.eps[ep]
	if c == nil || c.state == stateEnded {
		if c != nil && c.closeAt.After(time.Time{}) {
			// Our bye (or bye_ack) is out; the peer's answer, or its own
			// bye: nothing more to wait for, close now.
			for len(data) > 0 {
				h, _, rest, err := wire.NextFrame(data, t.lim)
				if err != nil {
					break
				}
				if h.Kind == wire.KindBye || h.Kind == wire.KindByeAck {
					t.closeEP(c, true)
					break
				}
				data = rest
			}
		}
		return
	}
	for len(data) > 0 {
		h, body, rest, err := wire.NextFrame(data, t.lim)
		if err != nil {
			t.protocolError(c, err)
			return
		}
		data = rest
		switch c.state {
		case stateHandshake:
			c.heard = true
			if h.Kind <= wire.KindRefuse {
				select {
				case c.hs <- hsFrame{h, body}:
				default:
					t.protocolError(c, fmt.Errorf("too many handshake frames"))
					return
				}
				continue
			}
			if len(c.early) > t.cfg.ControlWindow+16 {
				t.protocolError(c, fmt.Errorf("%d frames before the hello exchange ended", len(c.early)))
				return
			}
			c.early = append(c.early, early{h, body})
		case stateEstablished:
			c.Touch()
			if !t.dispatch(c, h, body) {
				return
			}
		default:
			return
		}
	}
}

func (t *Transport) protocolError(c *Conn, err error) {
	err = fmt.Errorf("%w: %w", peer.ErrProtocol, err)
	if c.state == stateHandshake {
		t.ctr.CountRefused(peer.RefusedMalformed)
		c.abortHandshake(err)
		t.closeEP(c, true)
		return
	}
	c.Fail(fmt.Errorf("%w: %s: %w", peer.ErrPeerLost, c.Node(), err), peer.LostProtocol)
}

// onData handles a data active message (worker); the status tells UCX to
// keep the descriptor (INPROGRESS), or drops it failing the sender's send.
func (t *Transport) onData(ep C.ucp_ep_h, header []byte, data unsafe.Pointer, n int, rndv bool) C.ucs_status_t {
	c := t.eps[ep]
	if c == nil || c.state == stateEnded {
		return C.UCS_ERR_CANCELED
	}
	h, err := wire.ParseHeader(header, t.lim)
	if err == nil && (h.Kind != wire.KindData || int(h.Type) != len(header)-wire.HeaderSize || int(h.Length) != n) {
		err = fmt.Errorf("data header says kind %d, %d header and %d payload bytes; the message has %d and %d",
			h.Kind, h.Type, h.Length, len(header)-wire.HeaderSize, n)
	}
	if err != nil {
		t.protocolError(c, err)
		return C.UCS_ERR_INVALID_PARAM
	}
	r := &rx{c: c, header: append([]byte(nil), header[wire.HeaderSize:]...), n: n}
	if !rndv {
		// An eager payload (a peer that does not ask for rendezvous): it
		// is in UCX's buffer now, so it is copied into a slot, and
		// counted, or refused if the pool has no room.
		r.slot = t.pool.TryGet(n)
		if r.slot == nil {
			t.protocolError(c, fmt.Errorf("eager data message of %d bytes with no room in the pool", n))
			return C.UCS_ERR_NO_RESOURCE
		}
		copy(r.slot.Bytes(), unsafe.Slice((*byte)(data), n))
		t.ctr.CopiedBytes.Add(uint64(n))
		r.done = true
		c.rxq = append(c.rxq, r)
		t.deliverReady(c)
		return C.UCS_OK
	}
	r.desc = data
	c.rxq = append(c.rxq, r)
	t.pending = append(t.pending, r)
	t.waiting.Store(int64(len(t.pending))) // before servePending's TryGet: a release after a failed try then wakes us
	t.servePending()
	return C.UCS_INPROGRESS
}

// servePending starts the receives of waiting data messages, in arrival
// order, while the pool has room (worker).
func (t *Transport) servePending() {
	for len(t.pending) > 0 {
		r := t.pending[0]
		slot := t.pool.TryGet(r.n)
		if slot == nil {
			if !r.waited {
				r.waited = true
				t.waits.Add(1)
			}
			return
		}
		t.pending[0] = nil
		t.pending = t.pending[1:]
		t.waiting.Store(int64(len(t.pending)))
		r.slot = slot
		id := t.newReq(r)
		b := slot.Bytes()
		buf := unsafe.Pointer(unsafe.SliceData(t.pool.Mem()[slot.Offset():]))
		st := C.sl_recv_data(t.w.worker, r.desc, buf, C.size_t(len(b)), t.poolMemh, C.uintptr_t(t.handle), C.uint64_t(id))
		r.desc = nil // UCX owns it now, whatever the outcome
		switch st {
		case C.UCS_INPROGRESS:
		case C.UCS_OK:
			t.takeReq(id)
			r.done = true
			t.deliverReady(r.c)
		default:
			t.takeReq(id)
			t.recvFailed(r, st)
		}
	}
}

func (t *Transport) recvFailed(r *rx, st C.ucs_status_t) {
	r.slot.Release()
	r.failed = true
	t.ctr.DataTruncated.Add(1)
	c := r.c
	if c.state == stateEstablished {
		c.Fail(fmt.Errorf("%w: %s: receive: %s", peer.ErrPeerLost, c.Node(), statusErr(st)), peer.LostReset)
	}
	t.deliverReady(c)
}

// deliverReady hands c's complete data messages to its link, in order
// (worker).
func (t *Transport) deliverReady(c *Conn) {
	for len(c.rxq) > 0 {
		r := c.rxq[0]
		if r.failed {
			c.rxq = c.rxq[1:]
			continue
		}
		if !r.done {
			break
		}
		if c.state == stateHandshake {
			return // delivered once established
		}
		c.rxq[0] = nil
		c.rxq = c.rxq[1:]
		if c.state == stateEnded {
			r.slot.Release()
			t.ctr.DataTruncated.Add(1)
			continue
		}
		c.Touch()
		c.DeliverData(r.header, r.slot) // answers the peer's bye once its last message is here
	}
}

// onEpError: UCX says c's endpoint failed (worker).
func (t *Transport) onEpError(ep C.ucp_ep_h, st C.ucs_status_t) {
	c := t.eps[ep]
	if c == nil {
		return
	}
	switch c.state {
	case stateHandshake:
		if c.dialed && !c.heard {
			// Nothing ever came back: no listener took the connection
			// (UCX's sockaddr connect reports a refusal this way).
			c.abortHandshake(fmt.Errorf("%w: nothing accepts UCX connections there (UCX: %s; a tcp peer input there looks the same)", peer.ErrUnreachable, statusErr(st)))
		} else {
			c.abortHandshake(fmt.Errorf("%w: endpoint error: %s", peer.ErrPeerLost, statusErr(st)))
		}
		t.closeEP(c, true)
	case stateEstablished:
		if bye, sent := c.ByeReceived(); bye {
			// Its bye's data messages have not all arrived, or the Conn
			// would have ended.
			c.Fail(fmt.Errorf("%w: %s: said goodbye after %d data messages, %d arrived: endpoint error: %s", peer.ErrPeerLost, c.Node(), sent, c.Received(), statusErr(st)), peer.LostReset)
		} else {
			c.Fail(fmt.Errorf("%w: %s: endpoint error: %s", peer.ErrPeerLost, c.Node(), statusErr(st)), peer.LostReset)
		}
		t.closeEP(c, true)
	default:
		t.closeEP(c, true)
	}
}

// Lanes is UCX's description of the endpoint's configuration: which
// transports and devices carry which traffic (ucp_ep_print_info), for the
// logs of an operator who wants to know whether RDMA, shared memory or TCP
// is in use. "" once the endpoint is closed.
func (c *Conn) Lanes() string {
	var s string
	c.t.do(func() error {
		if c.ep == nil {
			return nil
		}
		buf := make([]byte, 16<<10)
		n := C.sl_ep_info(c.ep, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)))
		s = string(buf[:n])
		return nil
	})
	return s
}
