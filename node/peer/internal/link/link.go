// Package link is the part of a peer Conn that both transports share: the
// receive queue behind Recv, the control window and its credits, the
// in-flight limit of data sends, heartbeat and silence detection, and the
// ending of a Conn (once, with one error). A transport supplies the Wire
// (how frames leave) and calls the Deliver*/Touch/Fail methods as frames
// arrive.
package link

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-daq/sluice/node/peer"
	"github.com/sluice-daq/sluice/node/peer/internal/wire"
)

// Wire is how a Conn's control-path frames leave. Its methods queue and
// return; they must not block on the network.
type Wire interface {
	// Control queues a control frame; it copies body before returning.
	Control(typ uint16, body []byte) error
	// Credit queues a credit frame for n control messages.
	Credit(n uint32)
	// Heartbeat queues a heartbeat frame.
	Heartbeat()
	// Shutdown tears the Conn's connection down once: with bye (our own
	// Close) it first sends a bye frame. In-flight data sends complete
	// with err. Called exactly once, by Fail.
	Shutdown(bye bool, err error)
}

// Params are a Conn's fixed properties, from the config and the hello.
type Params struct {
	Node, Addr    string // the peer's
	PeerMaxData   int    // the peer's MaxData
	PeerWindow    int    // control messages we may send before a credit
	Window        int    // control messages the peer may send before our credit
	SendQueue     int    // data sends in flight before SendData blocks
	Heartbeat     time.Duration
	PeerTimeout   time.Duration
	Counters      *Counters
	OnEnd         func() // runs once after the Conn ended (the transport forgets it)
	MaxHeaderSize int
}

// Conn is the shared half of a transport's Conn.
type Conn struct {
	p    Params
	wire Wire

	credMu   sync.Mutex
	credits  int
	credWake chan struct{} // closed and replaced when credits arrive

	sendSlots chan struct{} // a token per data send in flight

	mu          sync.Mutex
	q           []peer.Message
	head        int
	wake        chan struct{} // cap 1: something was queued
	taken       uint32        // control messages taken since the last credit
	outstanding int           // control messages received, not yet credited back
	err         error
	done        chan struct{}

	lastRecv, lastSend atomic.Int64 // unix ns
}

// New makes the shared half of a Conn over wire.
func New(p Params, wire Wire) *Conn {
	now := time.Now().UnixNano()
	c := &Conn{p: p, wire: wire, credits: p.PeerWindow, credWake: make(chan struct{}),
		sendSlots: make(chan struct{}, p.SendQueue), wake: make(chan struct{}, 1), done: make(chan struct{})}
	c.lastRecv.Store(now)
	c.lastSend.Store(now)
	return c
}

// Node is the peer's node id.
func (c *Conn) Node() string { return c.p.Node }

// RemoteAddr is the peer's advertised listen address.
func (c *Conn) RemoteAddr() string { return c.p.Addr }

// PeerMaxData is the largest payload the peer accepts.
func (c *Conn) PeerMaxData() int { return c.p.PeerMaxData }

// Done is closed when the Conn ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is nil while the Conn is up, then why it ended.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// SendControl waits for a credit, then queues the frame.
func (c *Conn) SendControl(ctx context.Context, typ uint16, body []byte) error {
	if len(body) > peer.MaxControl {
		return fmt.Errorf("%w: control message of %d bytes to %s, limit %d", peer.ErrTooLarge, len(body), c.p.Node, peer.MaxControl)
	}
	for {
		c.credMu.Lock()
		if err := c.Err(); err != nil {
			c.credMu.Unlock()
			return err
		}
		if c.credits > 0 {
			c.credits--
			err := c.wire.Control(typ, body)
			c.credMu.Unlock()
			if err != nil {
				return err
			}
			c.lastSend.Store(time.Now().UnixNano())
			c.p.Counters.ControlSent.Add(1)
			return nil
		}
		wake := c.credWake
		c.credMu.Unlock()
		select {
		case <-wake:
		case <-c.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// AddCredit: the peer's Recv took n of our control messages.
func (c *Conn) AddCredit(n uint32) error {
	c.credMu.Lock()
	defer c.credMu.Unlock()
	if c.credits+int(n) > c.p.PeerWindow {
		return fmt.Errorf("%w: %s credited %d control messages, %d were outstanding", peer.ErrProtocol, c.p.Node, n, c.p.PeerWindow-c.credits)
	}
	c.credits += int(n)
	close(c.credWake)
	c.credWake = make(chan struct{})
	return nil
}

// AcquireSend takes an in-flight slot for one data send, waiting while
// SendQueue are in flight. Errors: the Conn's, ctx's.
func (c *Conn) AcquireSend(ctx context.Context) error {
	if err := c.Err(); err != nil {
		return err
	}
	select {
	case c.sendSlots <- struct{}{}:
		if err := c.Err(); err != nil {
			<-c.sendSlots
			return err
		}
		return nil
	case <-c.done:
		return c.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CancelSend frees the slot AcquireSend took for a send that was never
// queued.
func (c *Conn) CancelSend() { <-c.sendSlots }

// SendDone frees the slot of a data send that completed with err and
// counts it.
func (c *Conn) SendDone(n int, err error) {
	<-c.sendSlots
	if err != nil {
		c.p.Counters.SendErrors.Add(1)
		return
	}
	c.p.Counters.DataSent.Add(1)
	c.p.Counters.DataBytesSent.Add(uint64(n))
}

// Touch records that a frame arrived (liveness).
func (c *Conn) Touch() { c.lastRecv.Store(time.Now().UnixNano()) }

// DeliverControl queues a received control message (body is kept). It
// returns ErrProtocol if the peer exceeded the window we granted.
func (c *Conn) DeliverControl(typ uint16, body []byte) error {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil
	}
	if c.outstanding >= c.p.Window {
		c.mu.Unlock()
		return fmt.Errorf("%w: %s sent more than the %d control messages it was granted", peer.ErrProtocol, c.p.Node, c.p.Window)
	}
	c.outstanding++
	c.push(peer.Message{Kind: peer.KindControl, Type: typ, Body: body})
	c.mu.Unlock()
	c.p.Counters.ControlReceived.Add(1)
	return nil
}

// DeliverData queues a received data message. If the Conn has ended (we
// closed it), the buffer is released instead.
func (c *Conn) DeliverData(header []byte, b peer.Buffer) {
	c.mu.Lock()
	if c.err != nil && errors.Is(c.err, peer.ErrClosed) {
		c.mu.Unlock()
		b.Release()
		return
	}
	c.push(peer.Message{Kind: peer.KindData, Header: header, Data: b})
	c.mu.Unlock()
	c.p.Counters.DataReceived.Add(1)
	c.p.Counters.DataBytesRecv.Add(uint64(len(b.Bytes())))
}

func (c *Conn) push(m peer.Message) {
	if c.head > 0 && c.head == len(c.q) {
		c.q, c.head = c.q[:0], 0
	}
	c.q = append(c.q, m)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// creditBatch: credits go back once a quarter of the window was taken (or
// at the next tick).
func (c *Conn) creditBatch() uint32 { return uint32(max(1, c.p.Window/4)) }

// Recv returns the next queued message, waiting for one; after the Conn
// ended it drains what is queued, then returns the error.
func (c *Conn) Recv(ctx context.Context) (peer.Message, error) {
	for {
		c.mu.Lock()
		if c.head < len(c.q) {
			m := c.q[c.head]
			c.q[c.head] = peer.Message{}
			c.head++
			var credit uint32
			if m.Kind == peer.KindControl {
				c.taken++
				if c.taken >= c.creditBatch() && c.err == nil {
					credit, c.taken = c.taken, 0
					c.outstanding -= int(credit)
				}
			}
			c.mu.Unlock()
			if credit > 0 {
				c.wire.Credit(credit)
				c.lastSend.Store(time.Now().UnixNano())
			}
			return m, nil
		}
		if err := c.err; err != nil {
			c.mu.Unlock()
			return peer.Message{}, err
		}
		c.mu.Unlock()
		select {
		case <-c.wake:
		case <-c.done:
		case <-ctx.Done():
			return peer.Message{}, ctx.Err()
		}
	}
}

// Tick is the transport's periodic call (every Heartbeat/2 or so): it
// ends a silent Conn, returns pending credits and sends a heartbeat when
// nothing else was sent for a Heartbeat.
func (c *Conn) Tick(now time.Time) {
	ns := now.UnixNano()
	if silent := time.Duration(ns - c.lastRecv.Load()); silent > c.p.PeerTimeout {
		c.Fail(fmt.Errorf("%w: %w: nothing from %s for %v (timeout %v)", peer.ErrPeerLost, peer.ErrHeartbeat, c.p.Node, silent.Round(time.Millisecond), c.p.PeerTimeout), peer.LostHeartbeat)
		return
	}
	c.mu.Lock()
	credit := c.taken
	if c.err != nil {
		credit = 0
	}
	c.taken = 0
	c.outstanding -= int(credit)
	c.mu.Unlock()
	if credit > 0 {
		c.wire.Credit(credit)
		c.lastSend.Store(ns)
	}
	if time.Duration(ns-c.lastSend.Load()) >= c.p.Heartbeat {
		c.wire.Heartbeat()
		c.lastSend.Store(ns)
	}
}

// Fail ends the Conn with err, once (later calls do nothing): lostReason
// (a peer.Lost* name, "" for a clean end) is counted; with peer.ErrClosed
// (our own Close) queued messages are released and the peer gets a bye.
// It reports whether this call ended the Conn.
func (c *Conn) Fail(err error, lostReason string) bool {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return false
	}
	c.err = err
	var drop []peer.Message
	ours := errors.Is(err, peer.ErrClosed)
	if ours {
		drop = c.q[c.head:]
		c.q, c.head = nil, 0
	}
	c.mu.Unlock()
	// Counters, the transport's bookkeeping and the failing of in-flight
	// sends all happen before Done closes, so whoever waits on Done sees
	// their effects.
	if lostReason != "" {
		c.p.Counters.CountLost(lostReason)
	}
	if c.p.OnEnd != nil {
		c.p.OnEnd()
	}
	for _, m := range drop {
		if m.Data != nil {
			m.Data.Release()
		}
	}
	c.wire.Shutdown(ours, err)
	close(c.done)
	c.credMu.Lock()
	close(c.credWake)
	c.credWake = make(chan struct{})
	c.credMu.Unlock()
	return true
}

// Close is Conn.Close: Fail with ErrClosed; after the Conn ended
// otherwise, it releases what Recv did not take.
func (c *Conn) Close() error {
	if c.Fail(fmt.Errorf("%w: conn to %s", peer.ErrClosed, c.p.Node), "") {
		return nil
	}
	c.mu.Lock()
	drop := c.q[c.head:]
	c.q, c.head = nil, 0
	c.mu.Unlock()
	for _, m := range drop {
		if m.Data != nil {
			m.Data.Release()
		}
	}
	return nil
}

// DeliverFrame takes a control-path frame of an established Conn: control,
// credit and heartbeat frames are handled here (done true, with the error
// that loses the Conn if any); any other kind (bye) is the transport's
// (done false). The caller has Touched the Conn.
func (c *Conn) DeliverFrame(h wire.Header, body []byte) (done bool, err error) {
	switch h.Kind {
	case wire.KindControl:
		return true, c.DeliverControl(h.Type, body)
	case wire.KindCredit:
		return true, c.AddCredit(wire.Credit(body))
	case wire.KindHeartbeat:
		return true, nil
	case wire.KindBye:
		return false, nil
	}
	return true, fmt.Errorf("%w: frame kind %d on an established connection", peer.ErrProtocol, h.Kind)
}
