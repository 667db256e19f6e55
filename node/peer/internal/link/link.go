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
	// Frame queues a whole control-path frame made here (bye, bye_ack).
	Frame(f []byte)
	// Shutdown tears the Conn's connection down once. With flush (our own
	// Close, or the peer's goodbye answered) the control-path frames
	// queued (a bye, a bye_ack) go out first and the connection closes
	// gracefully; without (a lost peer) it closes at once. In-flight data
	// sends complete with err. Called exactly once, by Fail.
	Shutdown(flush bool, err error)
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

	// The goodbye (see Finish): data messages we sent (completed without
	// error) and received; the peer's bye and the count it gave; our bye
	// and the peer's answer to it.
	sentOK    atomic.Uint64
	idle      chan struct{} // cap 1: the last send in flight completed
	finishing atomic.Bool   // Finish began: SendData is refused
	recvd     uint64        // under mu
	byeIn     bool          // under mu: the peer's bye arrived
	byeCount  uint64        // under mu: data messages it said it sent
	acking    bool          // under mu: our bye_ack is queued
	byeOut    bool          // under mu: our bye is queued
	acked     chan struct{} // closed when the peer's bye_ack arrived
	ackCount  uint64        // under mu: data messages it said it received
}

// New makes the shared half of a Conn over wire.
func New(p Params, wire Wire) *Conn {
	now := time.Now().UnixNano()
	c := &Conn{p: p, wire: wire, credits: p.PeerWindow, credWake: make(chan struct{}),
		sendSlots: make(chan struct{}, p.SendQueue), wake: make(chan struct{}, 1), done: make(chan struct{}),
		idle: make(chan struct{}, 1), acked: make(chan struct{})}
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
	if c.finishing.Load() {
		return fmt.Errorf("%w: conn to %s is finishing", peer.ErrClosed, c.p.Node)
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
	if err == nil {
		c.sentOK.Add(1) // before the slot is free: Finish counts it once none is in flight
	}
	<-c.sendSlots
	if len(c.sendSlots) == 0 {
		select {
		case c.idle <- struct{}{}:
		default:
		}
	}
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
	c.recvd++
	if c.err != nil && errors.Is(c.err, peer.ErrClosed) {
		c.mu.Unlock()
		b.Release()
		return
	}
	c.push(peer.Message{Kind: peer.KindData, Header: header, Data: b})
	c.mu.Unlock()
	c.p.Counters.DataReceived.Add(1)
	c.p.Counters.DataBytesRecv.Add(uint64(len(b.Bytes())))
	c.maybeAck()
}

// Received is how many data messages arrived on the Conn; ByeReceived
// whether the peer's bye did, and how many data messages it said it sent.
func (c *Conn) Received() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.recvd
}

// ByeReceived reports whether the peer said goodbye, and the data messages
// its bye counted.
func (c *Conn) ByeReceived() (bool, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byeIn, c.byeCount
}

// ByeComplete reports whether the peer said goodbye and every data
// message its bye counted has arrived: the Conn ends (or ended) as closed
// by the peer, and the end of its connections is no loss.
func (c *Conn) ByeComplete() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byeIn && c.recvd >= c.byeCount
}

// Acked reports whether the peer answered our bye (nothing more to wait
// for before the connection closes).
func (c *Conn) Acked() bool {
	select {
	case <-c.acked:
		return true
	default:
		return false
	}
}

// deliverBye takes the peer's bye: it sent n data messages in all.
func (c *Conn) deliverBye(n uint64) error {
	c.mu.Lock()
	if c.byeIn {
		c.mu.Unlock()
		return fmt.Errorf("%w: %s said goodbye twice", peer.ErrProtocol, c.p.Node)
	}
	c.byeIn, c.byeCount = true, n
	c.mu.Unlock()
	c.maybeAck()
	return nil
}

// deliverByeAck takes the peer's answer to our bye: it received n data
// messages in all. The Conn ends here, closed by us (Finish reads the
// count): the peer closes its side now, which must not look like a loss.
func (c *Conn) deliverByeAck(n uint64) error {
	c.mu.Lock()
	if !c.byeOut || c.Acked() {
		c.mu.Unlock()
		return fmt.Errorf("%w: %s answered a goodbye we did not say", peer.ErrProtocol, c.p.Node)
	}
	c.ackCount = n
	close(c.acked)
	c.mu.Unlock()
	c.Fail(fmt.Errorf("%w: conn to %s", peer.ErrClosed, c.p.Node), "")
	return nil
}

// maybeAck answers the peer's bye once every data message it counted has
// arrived, and ends the Conn as closed by the peer (unless our own bye is
// out too: Finish then ends it once the peer answers ours).
func (c *Conn) maybeAck() {
	c.mu.Lock()
	if !c.byeIn || c.acking || c.recvd < c.byeCount || c.err != nil {
		c.mu.Unlock()
		return
	}
	c.acking = true
	n, ours := c.recvd, c.byeOut
	c.mu.Unlock()
	c.wire.Frame(wire.AppendCount(nil, wire.KindByeAck, n))
	c.lastSend.Store(time.Now().UnixNano())
	if !ours {
		c.Fail(fmt.Errorf("%w: %s", peer.ErrPeerClosed, c.p.Node), "")
	}
}

// Finish is Conn.Finish: the goodbye that waits for the peer's word that
// everything arrived.
func (c *Conn) Finish(ctx context.Context) error {
	c.finishing.Store(true)
	for len(c.sendSlots) > 0 {
		select {
		case <-c.idle:
		case <-c.done:
			return c.finishErr()
		case <-ctx.Done():
			c.Close()
			return fmt.Errorf("%w: %d data messages to %s still in flight", ctx.Err(), len(c.sendSlots), c.p.Node)
		}
	}
	sent := c.sentOK.Load()
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.finishErr()
	}
	c.byeOut = true
	c.mu.Unlock()
	c.wire.Frame(wire.AppendCount(nil, wire.KindBye, sent))
	c.lastSend.Store(time.Now().UnixNano())
	select {
	case <-c.acked:
	case <-c.done:
		return c.finishErr()
	case <-ctx.Done():
		c.Close()
		return fmt.Errorf("%w: %s did not confirm the %d data messages sent", ctx.Err(), c.p.Node, sent)
	}
	// The Conn ends right after the answer (deliverByeAck closes acked,
	// then fails the Conn with ErrClosed): Finish returns once it has, so
	// that its caller sees it closed (Err ErrClosed; CI once saw nil).
	<-c.done
	c.mu.Lock()
	got := c.ackCount
	c.mu.Unlock()
	if got < sent {
		return fmt.Errorf("%w: %s confirmed %d of the %d data messages sent", peer.ErrPeerLost, c.p.Node, got, sent)
	}
	return nil
}

// finishErr is Finish's error for a Conn that ended before the peer
// confirmed: the peer was lost, or closed too (then whether it had every
// message cannot be known), or we closed it.
func (c *Conn) finishErr() error {
	err := c.Err()
	if c.Acked() {
		return nil
	}
	return fmt.Errorf("goodbye to %s unconfirmed after %d data messages sent: %w", c.p.Node, c.sentOK.Load(), err)
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
// (our own Close) queued messages are released and the peer gets a bye
// counting the data messages sent.
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
	bye := ours && !c.byeOut
	c.byeOut = c.byeOut || bye
	c.mu.Unlock()
	if bye {
		c.wire.Frame(wire.AppendCount(nil, wire.KindBye, c.sentOK.Load()))
	}
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
	c.wire.Shutdown(ours || errors.Is(err, peer.ErrPeerClosed), err)
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
// credit, heartbeat, bye and bye_ack frames. It returns the error that
// loses the Conn, if any. The caller has Touched the Conn.
func (c *Conn) DeliverFrame(h wire.Header, body []byte) error {
	switch h.Kind {
	case wire.KindControl:
		return c.DeliverControl(h.Type, body)
	case wire.KindCredit:
		return c.AddCredit(wire.Credit(body))
	case wire.KindHeartbeat:
		return nil
	case wire.KindBye:
		return c.deliverBye(wire.Count(body))
	case wire.KindByeAck:
		return c.deliverByeAck(wire.Count(body))
	}
	return fmt.Errorf("%w: frame kind %d on an established connection", peer.ErrProtocol, h.Kind)
}
