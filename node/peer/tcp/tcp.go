// Package tcp is the pure-Go peer transport ("tcp"): the peer protocol of
// package peer over two TCP connections per Conn, one for the control path
// (hello, control, credit, heartbeat, bye frames) and one for data frames,
// so that a 64 MiB data frame never delays a credit or a heartbeat.
//
// Data frames are written with writev straight from the sender's Region and
// read straight into a slot of the receive pool: the kernel's socket copies
// are the only ones (Stats.CopiedBytes stays 0). While the pool has no room
// for the next frame, its connection is not read: the sender's socket fills
// and its SendData blocks after Config.SendQueue sends in flight. Config's
// BusyPoll is ignored (Go's netpoller sleeps in epoll).
package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-daq/sluice/node/peer"
	"github.com/sluice-daq/sluice/node/peer/internal/link"
	"github.com/sluice-daq/sluice/node/peer/internal/pool"
	"github.com/sluice-daq/sluice/node/peer/internal/region"
	"github.com/sluice-daq/sluice/node/peer/internal/wire"
)

// Name is the transport's registered name.
const Name = "tcp"

func init() {
	peer.Register(Name, func(c peer.Config) (peer.Transport, error) { return New(c) })
}

// socketBuffer is SO_SNDBUF/SO_RCVBUF of data connections: 4 MiB reached
// iperf3's loopback throughput on these machines.
const socketBuffer = 4 << 20

// byeGrace bounds how long a closing Conn tries to get its bye out, and how
// long a Conn that received one waits for the data connection to drain.
const byeGrace = time.Second

// Transport is the TCP peer transport.
type Transport struct {
	cfg  peer.Config
	ln   *net.TCPListener
	addr string
	lim  wire.Limits
	pool *pool.Pool
	ctr  link.Counters

	reg      *link.Registry[*Conn]
	regions  *region.Set
	closed   <-chan struct{} // reg's
	closeErr error
	once     sync.Once
	wg       sync.WaitGroup // every goroutine of the transport and its Conns

	mu       sync.Mutex
	joins    map[[wire.CookieSize]byte]chan *net.TCPConn
	sockets  map[*net.TCPConn]struct{} // connections in a handshake
	isClosed bool
}

var _ peer.Transport = (*Transport)(nil)

// New starts a TCP peer transport listening at cfg.Listen.
func New(cfg peer.Config) (*Transport, error) {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	lc := net.ListenConfig{Control: setBuffers}
	l, err := lc.Listen(context.Background(), "tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("peer tcp: listen %s: %w", cfg.Listen, err)
	}
	p, err := pool.New(cfg.PoolBytes, cfg.MaxData, nil, nil)
	if err != nil {
		l.Close()
		return nil, err
	}
	t := &Transport{
		cfg: cfg, ln: l.(*net.TCPListener), addr: l.Addr().String(), pool: p,
		lim:   wire.Limits{MaxControl: peer.MaxControl, MaxHeader: peer.MaxHeader, MaxData: cfg.MaxData},
		joins: map[[wire.CookieSize]byte]chan *net.TCPConn{}, sockets: map[*net.TCPConn]struct{}{},
	}
	t.reg = link.NewRegistry[*Conn](cfg.AcceptQueue, &t.ctr)
	t.closed = t.reg.Closed()
	// TCP needs no registration with the kernel; the bookkeeping is the
	// same as UCX's so that callers behave alike.
	t.regions = region.NewSet("peer tcp", t.Addr, &t.ctr, region.Hooks{})
	if t.cfg.Advertise == "" {
		t.cfg.Advertise = t.addr
	}
	t.wg.Add(2)
	go t.acceptLoop()
	go t.tickLoop()
	return t, nil
}

// setBuffers sets the socket buffers before the handshake, so the kernel
// can negotiate a window scale that uses them (accepted connections inherit
// the listener's).
func setBuffers(_, _ string, rc syscall.RawConn) error {
	return rc.Control(func(fd uintptr) {
		unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, socketBuffer)
		unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, socketBuffer)
	})
}

// Name is "tcp".
func (t *Transport) Name() string { return Name }

// Addr is the bound listen address.
func (t *Transport) Addr() string { return t.addr }

// PoolMemory is the receive pool's arena: received payloads lie inside it
// (the conformance suite checks this).
func (t *Transport) PoolMemory() []byte { return t.pool.Mem() }

// Stats returns the counters.
func (t *Transport) Stats() peer.Stats {
	s := t.ctr.Snapshot()
	s.PoolBytes = int64(len(t.pool.Mem()))
	s.PoolHeld = t.pool.Held()
	s.PoolWaits = t.pool.Waits()
	return s
}

func (t *Transport) isDone() bool {
	select {
	case <-t.closed:
		return true
	default:
		return false
	}
}

// track registers a socket in a handshake so Close can interrupt it; it
// returns false (and closes c) if the transport is closed.
func (t *Transport) track(c *net.TCPConn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.isClosed {
		c.Close()
		return false
	}
	t.sockets[c] = struct{}{}
	return true
}

func (t *Transport) untrack(c *net.TCPConn) {
	t.mu.Lock()
	delete(t.sockets, c)
	t.mu.Unlock()
}

func (t *Transport) acceptLoop() {
	defer t.wg.Done()
	for {
		c, err := t.ln.AcceptTCP()
		if err != nil {
			if t.isDone() {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// EMFILE and friends: back off instead of spinning.
			select {
			case <-t.closed:
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		if !t.track(c) {
			continue
		}
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			t.serveHandshake(c)
		}()
	}
}

// tickLoop drives every Conn's heartbeats and silence detection.
func (t *Transport) tickLoop() {
	defer t.wg.Done()
	tk := time.NewTicker(t.cfg.Heartbeat / 2)
	defer tk.Stop()
	var cs []*Conn
	for {
		select {
		case <-t.closed:
			return
		case now := <-tk.C:
			cs = t.reg.Conns(cs[:0])
			for _, c := range cs {
				if bye, _ := c.ByeReceived(); bye && c.poolWait.Load() {
					// The peer said goodbye and its last data waits for
					// room in our own pool: no sign of a lost peer.
					c.Touch()
				}
				c.Tick(now)
			}
		}
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

// Register makes mem a Region.
func (t *Transport) Register(mem []byte) (peer.Region, error) { return t.regions.Register(mem) }

// AllocRegion maps n bytes of anonymous memory as a Region.
func (t *Transport) AllocRegion(n int) (peer.Region, error) { return t.regions.Alloc(n) }

// Close closes every Conn, stops listening, waits for the transport's
// goroutines and frees the pool (once the receiver released every buffer).
func (t *Transport) Close() error {
	t.once.Do(func() {
		t.mu.Lock()
		t.isClosed = true
		for s := range t.sockets {
			s.Close()
		}
		t.mu.Unlock()
		conns := t.reg.Close()
		t.ln.Close()
		for _, c := range conns {
			c.Close()
		}
		t.wg.Wait()
		t.pool.Close()
		t.closeErr = t.regions.Close()
	})
	return t.closeErr
}
