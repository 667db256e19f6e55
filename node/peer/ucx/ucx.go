//go:build ucx

package ucx

/*
#cgo pkg-config: ucx
#include <stdlib.h>
#include "sluice_ucx.h"
*/
import "C"

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"runtime/cgo"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sluice-daq/sluice/node/peer"
	"github.com/sluice-daq/sluice/node/peer/internal/link"
	"github.com/sluice-daq/sluice/node/peer/internal/pool"
	"github.com/sluice-daq/sluice/node/peer/internal/region"
	"github.com/sluice-daq/sluice/node/peer/internal/wire"
)

// Name is the transport's registered name.
const Name = "ucx"

func init() {
	peer.Register(Name, func(c peer.Config) (peer.Transport, error) { return New(c) })
	peer.Describe(Name, func() string { return "UCX " + Version() + " at run time, built for the " + APIVersion() + " API" })
}

// byeGrace bounds how long a closing Conn waits for its peer to close after
// the bye, and how long a closing Transport waits for its endpoints.
const byeGrace = time.Second

// Version is the UCX library version found at run time ("1.13.1").
func Version() string {
	var maj, min, rel C.uint
	C.sl_version(&maj, &min, &rel)
	return fmt.Sprintf("%d.%d.%d", maj, min, rel)
}

// APIVersion is the UCP API version sluice was compiled against ("1.13").
func APIVersion() string { return fmt.Sprintf("%d.%d", C.UCP_API_MAJOR, C.UCP_API_MINOR) }

// initMu serializes the creation and destruction of UCX contexts: sl_init
// sets process-wide options (UCS global options, UCM's, the environment)
// that are not safe to set from several threads at once.
var initMu sync.Mutex

// live counts UCX resources of every Transport in the process, for the
// conformance suite's leak check.
var live struct {
	workers, listeners, endpoints, memh, requests atomic.Int64
}

func statusErr(st C.ucs_status_t) string { return C.GoString(C.ucs_status_string(st)) }

// Transport is the UCX peer transport.
type Transport struct {
	cfg    peer.Config
	lim    wire.Limits
	addr   string
	handle cgo.Handle
	ctr    link.Counters
	pool   *pool.Pool
	waits  atomic.Uint64

	ops     opQueue
	reg     *link.Registry[*Conn]
	regions *region.Set
	closed  <-chan struct{} // reg's
	done    chan struct{}   // the worker goroutine has exited
	once    sync.Once
	cerr    error
	wg      sync.WaitGroup // handshake goroutines

	// Worker state: touched only on the worker goroutine.
	w         C.sl_worker_t
	listener  C.ucp_listener_h
	poolMemh  C.ucp_mem_h
	eps       map[C.ucp_ep_h]*Conn
	reqs      map[uint64]any
	nextReq   uint64
	pending   []*rx // data messages waiting for a pool slot, in arrival order
	closing   int   // endpoints being closed
	stopping  bool
	stopAt    time.Time
	slotFreed atomic.Bool
	// waiting mirrors len(pending) for the goroutines that release slots:
	// they wake the worker only when a data message waits for room.
	waiting    atomic.Int64
	nextTick   time.Time
	epfd, evfd int
}

var _ peer.Transport = (*Transport)(nil)

// opQueue carries closures to the worker goroutine.
type opQueue struct {
	mu       sync.Mutex
	q        []func()
	closed   bool
	sleeping atomic.Bool
	evfd     int
}

// push queues f; false once the worker has stopped taking operations.
func (o *opQueue) push(f func()) bool {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return false
	}
	o.q = append(o.q, f)
	o.mu.Unlock()
	if o.sleeping.Load() {
		o.wake()
	}
	return true
}

func (o *opQueue) wake() {
	var one = [8]byte{1}
	unix.Write(o.evfd, one[:])
}

func (o *opQueue) take(buf []func()) []func() {
	o.mu.Lock()
	buf = append(buf[:0], o.q...)
	for i := range o.q {
		o.q[i] = nil
	}
	o.q = o.q[:0]
	o.mu.Unlock()
	return buf
}

func (o *opQueue) empty() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.q) == 0
}

// do runs f on the worker and waits for it.
func (t *Transport) do(f func() error) error {
	res := make(chan error, 1)
	if !t.ops.push(func() { res <- f() }) {
		return fmt.Errorf("%w: transport %s", peer.ErrClosed, t.addr)
	}
	select {
	case err := <-res:
		return err
	case <-t.done:
		select {
		case err := <-res:
			return err
		default:
			return fmt.Errorf("%w: transport %s", peer.ErrClosed, t.addr)
		}
	}
}

// New starts a UCX transport listening at cfg.Listen (an IP address and a
// port; port 0 picks one).
func New(cfg peer.Config) (*Transport, error) {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	host, port, err := splitAddr(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("%w: Listen: %v", peer.ErrConfig, err)
	}
	t := &Transport{
		cfg: cfg, lim: wire.Limits{MaxControl: peer.MaxControl, MaxHeader: peer.MaxHeader, MaxData: cfg.MaxData},
		done: make(chan struct{}), eps: map[C.ucp_ep_h]*Conn{}, reqs: map[uint64]any{},
	}
	t.reg = link.NewRegistry[*Conn](cfg.AcceptQueue, &t.ctr)
	t.closed = t.reg.Closed()
	t.regions = region.NewSet("peer ucx", t.Addr, &t.ctr, t.regionHooks())
	t.pool, err = pool.New(cfg.PoolBytes, cfg.MaxData, t.onSlotFree, nil)
	if err != nil {
		return nil, err
	}
	if t.evfd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		t.pool.Close()
		return nil, fmt.Errorf("peer ucx: eventfd: %w", err)
	}
	t.ops.evfd = t.evfd
	t.handle = cgo.NewHandle(t)
	ready := make(chan error, 1)
	go t.run(host, port, ready)
	if err := <-ready; err != nil {
		<-t.done
		t.handle.Delete()
		unix.Close(t.evfd)
		t.pool.Close()
		return nil, err
	}
	return t, nil
}

// splitAddr resolves "host:port" to a numeric IP and a port.
func splitAddr(addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q is not a number in 0..65535", p)
	}
	if h == "" {
		h = "0.0.0.0"
	}
	if net.ParseIP(h) == nil {
		ips, err := net.LookupIP(h)
		if err != nil || len(ips) == 0 {
			return "", 0, fmt.Errorf("host %q: %v", h, err)
		}
		h = ips[0].String()
		for _, ip := range ips {
			if ip.To4() != nil {
				h = ip.String()
				break
			}
		}
	}
	return h, port, nil
}

func (t *Transport) onSlotFree() {
	if t.waiting.Load() == 0 {
		return // nothing waits for room: no need to wake the worker
	}
	t.slotFreed.Store(true)
	if t.ops.sleeping.Load() {
		t.ops.wake()
	}
}

// Name is "ucx".
func (t *Transport) Name() string { return Name }

// Addr is the bound listen address.
func (t *Transport) Addr() string { return t.addr }

// PoolMemory is the receive pool's arena (registered with UCX).
func (t *Transport) PoolMemory() []byte { return t.pool.Mem() }

// Stats returns the counters.
func (t *Transport) Stats() peer.Stats {
	s := t.ctr.Snapshot()
	s.PoolBytes = int64(len(t.pool.Mem()))
	s.PoolHeld = t.pool.Held()
	s.PoolWaits = t.pool.Waits() + t.waits.Load()
	return s
}

// run is the worker goroutine: it owns the UCX context and worker.
func (t *Transport) run(host string, port int, ready chan<- error) {
	runtime.LockOSThread() // never unlocked: the thread ends with UCX's state on it
	defer close(t.done)
	fail := func(err error) {
		t.ops.mu.Lock()
		t.ops.closed = true
		t.ops.mu.Unlock()
		ready <- err
	}
	wakeup := C.int(1)
	if t.cfg.BusyPoll {
		wakeup = 0
	}
	initMu.Lock()
	st := C.sl_init(wakeup, C.uintptr_t(t.handle), &t.w)
	initMu.Unlock()
	if st != C.UCS_OK {
		fail(fmt.Errorf("peer ucx: init: %s", statusErr(st)))
		return
	}
	live.workers.Add(1)
	if need := wire.HeaderSize + peer.MaxHeader; int(t.w.max_am_header) < need {
		t.destroy()
		fail(fmt.Errorf("peer ucx: the transports UCX chose carry active-message headers of at most %d bytes, sluice needs %d", t.w.max_am_header, need))
		return
	}
	mem := t.pool.Mem()
	if st := C.sl_mem_map(t.w.ctx, unsafe.Pointer(&mem[0]), C.size_t(len(mem)), &t.poolMemh); st != C.UCS_OK {
		t.destroy()
		fail(fmt.Errorf("peer ucx: register the receive pool (%d bytes): %s", len(mem), statusErr(st)))
		return
	}
	live.memh.Add(1)
	chost := C.CString(host)
	var bound [96]C.char
	st = C.sl_listen(t.w.worker, chost, C.int(port), C.uintptr_t(t.handle), &t.listener, &bound[0], C.size_t(len(bound)))
	C.free(unsafe.Pointer(chost))
	if st != C.UCS_OK {
		t.destroy()
		fail(fmt.Errorf("peer ucx: listen %s: %s", t.cfg.Listen, statusErr(st)))
		return
	}
	live.listeners.Add(1)
	t.addr = C.GoString(&bound[0])
	if t.cfg.Advertise == "" {
		t.cfg.Advertise = t.addr
	}
	if err := t.setupWait(); err != nil {
		t.destroy()
		fail(err)
		return
	}
	ready <- nil
	t.loop()
	t.destroy()
}

// setupWait makes the epoll set the worker sleeps on: UCX's event fd and
// our eventfd (operations, freed slots).
func (t *Transport) setupWait() error {
	t.epfd = -1
	if t.cfg.BusyPoll {
		return nil
	}
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("peer ucx: epoll: %w", err)
	}
	for _, f := range []int{int(t.w.efd), t.evfd} {
		if err := unix.EpollCtl(fd, unix.EPOLL_CTL_ADD, f, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(f)}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("peer ucx: epoll add: %w", err)
		}
	}
	t.epfd = fd
	return nil
}

func (t *Transport) loop() {
	var ops []func()
	var evs [4]unix.EpollEvent
	tick := t.cfg.Heartbeat / 2
	t.nextTick = time.Now().Add(tick)
	for {
		for i := 0; i < 256 && C.ucp_worker_progress(t.w.worker) != 0; i++ {
		}
		ops = t.ops.take(ops)
		for i, f := range ops {
			f()
			ops[i] = nil
		}
		if t.slotFreed.Swap(false) {
			t.servePending()
		}
		now := time.Now()
		if !now.Before(t.nextTick) {
			t.tick(now)
			t.nextTick = now.Add(tick)
		}
		if t.stopping {
			if len(t.eps) == 0 && t.closing == 0 {
				return
			}
			if now.After(t.stopAt) {
				t.forceCloseAll()
				if now.After(t.stopAt.Add(byeGrace)) {
					return // UCX never finished closing: destroying the worker frees the rest
				}
			}
		}
		// No spinning before sleeping: the worker's locked thread holds one
		// of the process's Ps while it polls, and on a machine with few
		// cores the goroutines that answer need it.
		if t.epfd < 0 || len(ops) > 0 {
			continue
		}
		t.ops.sleeping.Store(true)
		if !t.ops.empty() || t.slotFreed.Load() {
			t.ops.sleeping.Store(false)
			continue
		}
		if st := C.ucp_worker_arm(t.w.worker); st == C.UCS_ERR_BUSY {
			t.ops.sleeping.Store(false)
			continue
		}
		ms := int(time.Until(t.nextTick)/time.Millisecond) + 1
		unix.EpollWait(t.epfd, evs[:], ms)
		t.ops.sleeping.Store(false)
		var b [8]byte
		unix.Read(t.evfd, b[:])
	}
}

// tick drives heartbeats, silence detection and the ends of goodbyes.
func (t *Transport) tick(now time.Time) {
	for _, c := range t.eps {
		switch c.state {
		case stateEstablished:
			if bye, _ := c.ByeReceived(); bye && len(c.rxq) > 0 {
				c.Touch() // draining into our own pool after a goodbye: not silence
			}
			c.Tick(now)
		case stateEnded:
			if c.closeAt.IsZero() || now.Before(c.closeAt) {
				continue
			}
			t.closeEP(c, true)
		}
	}
}

// destroy frees the UCX side (worker goroutine, at the end).
func (t *Transport) destroy() {
	t.ops.mu.Lock()
	t.ops.closed = true
	drop := t.ops.q
	t.ops.q = nil
	t.ops.mu.Unlock()
	for _, f := range drop {
		f() // each op sees its Conn ended and completes without UCX
	}
	if t.listener != nil {
		C.ucp_listener_destroy(t.listener)
		t.listener = nil
		live.listeners.Add(-1)
	}
	for _, rx := range t.pending {
		C.ucp_am_data_release(t.w.worker, rx.desc)
	}
	t.pending = nil
	t.regions.Each(t.unmap) // their memory is unmapped by Close
	if t.poolMemh != nil {
		C.ucp_mem_unmap(t.w.ctx, t.poolMemh)
		t.poolMemh = nil
		live.memh.Add(-1)
	}
	if t.w.worker != nil {
		live.workers.Add(-1)
	}
	live.endpoints.Add(-int64(len(t.eps)))
	live.requests.Add(-int64(len(t.reqs)))
	for id, r := range t.reqs {
		if s, ok := r.(*sendReq); ok {
			s.complete(fmt.Errorf("%w: transport %s", peer.ErrClosed, t.addr))
		}
		delete(t.reqs, id)
	}
	initMu.Lock()
	C.sl_destroy(&t.w)
	initMu.Unlock()
	if t.epfd >= 0 {
		unix.Close(t.epfd)
	}
}

// Accept returns the next peer that connected and passed the hello.
func (t *Transport) Accept(ctx context.Context) (peer.Conn, error) {
	c, err := t.reg.Accept(ctx, t.addr)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Close closes every Conn, waits (at most about a second) for their
// endpoints, and frees UCX.
func (t *Transport) Close() error {
	t.once.Do(func() {
		conns := t.reg.Close()
		for _, c := range conns {
			c.Close()
		}
		t.ops.push(func() {
			t.stopping = true
			t.stopAt = time.Now().Add(byeGrace)
			if t.listener != nil {
				C.ucp_listener_destroy(t.listener)
				t.listener = nil
				live.listeners.Add(-1)
			}
			for _, c := range t.eps {
				if c.state == stateHandshake {
					c.abortHandshake(fmt.Errorf("%w: transport %s", peer.ErrClosed, t.addr))
				}
			}
		})
		<-t.done
		t.wg.Wait()
		t.handle.Delete()
		unix.Close(t.evfd)
		t.pool.Close()
		t.cerr = t.regions.Close()
	})
	return t.cerr
}

// newReq records a request the worker waits for.
func (t *Transport) newReq(r any) uint64 {
	t.nextReq++
	t.reqs[t.nextReq] = r
	live.requests.Add(1)
	return t.nextReq
}

func (t *Transport) takeReq(id uint64) any {
	r, ok := t.reqs[id]
	if ok {
		delete(t.reqs, id)
		live.requests.Add(-1)
	}
	return r
}
