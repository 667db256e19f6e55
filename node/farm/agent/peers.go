package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-daq/sluice/node/farm"
	"github.com/sluice-daq/sluice/node/farm/control"
	"github.com/sluice-daq/sluice/node/peer"
)

// typRelay is the transport message type of a release the EM relays to
// the RUs (a BU's own release to the EM travels as farm.KindRelease): a
// folded node that is EM and RU tells them apart.
const typRelay = 0x100 | uint16(farm.KindRelease)

// outMsg is one message for a peer: control (typ, body) or data (header
// and the packets to send as its payload; unpin, once they were copied or
// the message dropped, lets the RU free them).
type outMsg struct {
	typ     uint16
	body    []byte
	header  []byte
	packets [][]byte
	unpin   func()
	// inc: the BU incarnation a data message is for (0: control), so a
	// queue made before the peer's record arrived can drop what it holds
	// for an incarnation that ended (dropFor).
	inc uint64
}

func (m *outMsg) done() {
	if m.unpin != nil {
		m.unpin()
		m.unpin = nil
	}
}

// peerConn is the agent's link to one other node: a queue the loop puts
// messages on without blocking, a sender goroutine that waits for the
// connection and sends in order, and a reader that posts what arrives.
type peerConn struct {
	node    string
	inc     uint64
	conn    peer.Conn
	dialing bool
	ready   chan struct{} // closed when conn is set
	done    chan struct{} // closed by close
	once    sync.Once

	mu     sync.Mutex
	q      []outMsg
	closed bool // q dropped: enqueue drops too
	cv     *sync.Cond
	// sending: a message taken off q whose send has not returned.
	sending bool
	// waitSince, warned: since when messages wait unconnected, and when
	// that was last logged (the agent's loop only: checkQueued).
	waitSince, warned time.Time
}

func newPeerConn(node string, inc uint64) *peerConn {
	p := &peerConn{node: node, inc: inc, ready: make(chan struct{}), done: make(chan struct{})}
	p.cv = sync.NewCond(&p.mu)
	return p
}

func (p *peerConn) enqueue(m outMsg) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		m.done() // closed: dropped
		return
	}
	p.q = append(p.q, m)
	p.mu.Unlock()
	p.cv.Signal()
}

func (p *peerConn) close() {
	p.once.Do(func() {
		close(p.done)
		p.mu.Lock()
		q := p.q
		p.q, p.closed = nil, true
		p.mu.Unlock()
		for i := range q {
			q[i].done() // dropped unsent
		}
		p.cv.Broadcast()
		if p.conn != nil {
			p.conn.Close()
		}
	})
}

// dropFor drops the queued messages for incarnation inc (it ended): their
// packets are unpinned, so the RU's readout gets its ring space back. It
// returns how many it dropped.
func (p *peerConn) dropFor(inc uint64) int {
	p.mu.Lock()
	var gone []outMsg
	kept := p.q[:0]
	for _, m := range p.q {
		if m.inc == inc {
			gone = append(gone, m)
		} else {
			kept = append(kept, m)
		}
	}
	for i := len(kept); i < len(p.q); i++ {
		p.q[i] = outMsg{}
	}
	p.q = kept
	p.mu.Unlock()
	for i := range gone {
		gone[i].done()
	}
	return len(gone)
}

// queued reports how many messages wait in the queue and whether the link
// is connected.
func (p *peerConn) queued() (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.q), p.conn != nil
}

// next waits for a message (false: closed).
func (p *peerConn) next() (outMsg, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.q) == 0 {
		select {
		case <-p.done:
			return outMsg{}, false
		default:
		}
		p.cv.Wait()
	}
	m := p.q[0]
	p.q[0] = outMsg{}
	p.q = p.q[1:]
	p.sending = true
	return m, true
}

// sent: the message next returned was sent (or failed).
func (p *peerConn) sent() {
	p.mu.Lock()
	p.sending = false
	p.mu.Unlock()
}

// unsent reports whether messages are queued or being sent.
func (p *peerConn) unsent() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed && (len(p.q) > 0 || p.sending)
}

// connect makes sure there is a link to m: the node with the smaller id
// dials, the other accepts.
func (a *Agent) connect(ctx context.Context, m *member) {
	p := a.peers[m.Node]
	if p != nil && p.inc != 0 && p.inc != uint64(m.Incarnation) {
		p.close() // an earlier incarnation's
		p = nil
	}
	if p == nil {
		p = a.ensurePeer(ctx, m.Node)
	}
	a.link(ctx, p, m)
}

// link binds p to member m's incarnation and dials it if this node is the
// one that dials.
func (a *Agent) link(ctx context.Context, p *peerConn, m *member) {
	p.inc = uint64(m.Incarnation)
	if a.cfg.Node < m.Node && m.Address != "" && p.conn == nil && !p.dialing {
		p.dialing = true
		go a.dial(ctx, p, m.Address)
	}
}

// ensurePeer returns node's link, making one if there is none: to a member
// it is bound and dialled as connect does (a link made again after the
// peer was lost — the EM has not declared it dead yet — must not queue for
// ever); to a node whose membership record has not reached us yet it is
// not connected: messages queue until it is (or until the incarnation
// they are for ends: memberGone).
func (a *Agent) ensurePeer(ctx context.Context, node string) *peerConn {
	if p := a.peers[node]; p != nil {
		return p
	}
	p := newPeerConn(node, 0)
	a.peers[node] = p
	go a.sender(ctx, p)
	if m := a.members[node]; m != nil && node != a.cfg.Node {
		a.link(ctx, p, m)
	}
	return p
}

func (a *Agent) dial(ctx context.Context, p *peerConn, addr string) {
	for {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		c, err := a.cfg.Transport.Connect(dctx, addr)
		cancel()
		if err == nil {
			a.post(ctx, func() { a.attach(ctx, c, p) })
			return
		}
		if errors.Is(err, peer.ErrRefused) {
			a.log.Error("farm: peer refused us", "peer", p.node, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-p.done:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (a *Agent) acceptLoop(ctx context.Context) {
	for {
		c, err := a.cfg.Transport.Accept(ctx)
		if err != nil {
			return
		}
		if a.post(ctx, func() { a.attach(ctx, c, nil) }) != nil {
			c.Close()
			return
		}
	}
}

// attach binds an established connection to its peer (want: the dialled
// one, nil when accepted).
func (a *Agent) attach(ctx context.Context, c peer.Conn, want *peerConn) {
	p := a.peers[c.Node()]
	if want != nil && p != want {
		c.Close() // the peer changed incarnation while we dialled
		return
	}
	if p == nil {
		// Accepted before its membership record reached us.
		p = a.ensurePeer(ctx, c.Node())
	}
	if p.conn != nil {
		c.Close()
		return
	}
	p.conn = c
	close(p.ready)
	go a.reader(ctx, p)
}

func (a *Agent) sender(ctx context.Context, p *peerConn) {
	select {
	case <-p.ready:
	case <-p.done:
		return
	case <-ctx.Done():
		return
	}
	for {
		m, ok := p.next()
		if !ok {
			return
		}
		var err error
		if m.header == nil {
			err = p.conn.SendControl(ctx, m.typ, m.body)
		} else {
			err = a.sendData(ctx, p, &m)
		}
		p.sent()
		if err != nil {
			if ctx.Err() == nil {
				a.log.Warn("farm: send failed", "peer", p.node, "err", err)
			}
			return
		}
	}
}

// sendData copies the packets into one send-pool slot of registered
// memory and sends it as one data message; the slot returns to the pool
// when the transport is done with it.
func (a *Agent) sendData(ctx context.Context, p *peerConn, m *outMsg) error {
	defer m.done()
	n := 0
	for _, b := range m.packets {
		n += len(b)
	}
	slot, err := a.pool.get(ctx, n)
	if err != nil {
		return err
	}
	off := 0
	buf := slot.region.Bytes()
	for _, b := range m.packets {
		off += copy(buf[off:], b)
	}
	m.done() // copied: the RU may free them
	return p.conn.SendData(ctx, m.header, slot.region.Slice(0, n), func(error) { a.pool.put(slot) })
}

func (a *Agent) reader(ctx context.Context, p *peerConn) {
	for {
		msg, err := p.conn.Recv(ctx)
		if err != nil {
			a.post(ctx, func() { a.peerLost(ctx, p, err) })
			return
		}
		if a.post(ctx, func() { a.receive(ctx, p, msg) }) != nil {
			if msg.Data != nil {
				msg.Data.Release()
			}
			return
		}
	}
}

// peerLost: the connection to p ended. The EM fences a BU it loses (its
// lease is revoked: it must come back as a new incarnation) and
// reassigns its work at once; a BU stops waiting for an RU it loses.
func (a *Agent) peerLost(ctx context.Context, p *peerConn, err error) {
	if a.peers[p.node] != p {
		return
	}
	delete(a.peers, p.node)
	p.close()
	m := a.members[p.node]
	if ctx.Err() != nil || m == nil {
		return
	}
	if a.opStopped {
		// Members leave as they finish a stopped run.
		a.log.Info("farm: peer gone (the run is stopped)", "peer", p.node, "err", err)
	} else {
		a.log.Warn("farm: peer lost", "peer", p.node, "err", err)
	}
	if m.roles&farm.RoleBU != 0 && a.em != nil {
		inc := m.Incarnation
		go func() {
			fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			f := control.Fencing{By: a.cfg.Node, Reason: "declared dead: " + err.Error()}
			if err := a.cfg.Control.Fence(fctx, uint64(inc), f); err != nil {
				a.log.Warn("farm: fence", "peer", p.node, "err", err)
			}
		}()
		a.em.Dead(m.Node, uint64(m.Incarnation))
	}
	if m.roles&farm.RoleRU != 0 && a.bu != nil {
		a.bu.RUDead(m.Node)
	}
}

func (a *Agent) closePeers() {
	for n, p := range a.peers {
		p.close()
		delete(a.peers, n)
	}
}

// receive handles one message from p on the loop.
func (a *Agent) receive(ctx context.Context, p *peerConn, msg peer.Message) {
	if msg.Kind == peer.KindData {
		h, err := farm.DecodeData(msg.Header)
		if err != nil {
			a.log.Warn("farm: bad data header", "peer", p.node, "err", err)
			a.drop("bad_data_header")
			msg.Data.Release()
			return
		}
		a.onData(p.node, h, msg.Data)
		return
	}
	if err := a.control(p.node, msg.Type, msg.Body); err != nil {
		a.log.Warn("farm: bad control message", "peer", p.node, "type", msg.Type, "err", err)
		a.drop("bad_message")
	}
}

// control applies one control message, from a peer or from this node.
func (a *Agent) control(from string, typ uint16, body []byte) error {
	switch typ {
	case uint16(farm.KindCredit):
		c, err := farm.DecodeCredit(body)
		if err != nil {
			return err
		}
		a.onCredit(c)
	case uint16(farm.KindAssign):
		as, err := farm.DecodeAssign(body)
		if err != nil {
			return err
		}
		a.onAssign(as)
	case uint16(farm.KindRequest):
		q, err := farm.DecodeRequest(body)
		if err != nil {
			return err
		}
		a.onRequest(q)
	case uint16(farm.KindRelease):
		r, err := farm.DecodeRelease(body)
		if err != nil {
			return err
		}
		a.onRelease(r)
	case typRelay:
		r, err := farm.DecodeRelease(body)
		if err != nil {
			return err
		}
		a.onRelay(r)
	case uint16(farm.KindAnnounce):
		an, err := farm.DecodeAnnounce(body)
		if err != nil {
			return err
		}
		a.onAnnounce(an)
	case uint16(farm.KindEnd):
		e, err := farm.DecodeEnd(body)
		if err != nil {
			return err
		}
		if a.ru == nil {
			a.drop("end_not_ru")
			return nil
		}
		a.ru.End(e)
	case uint16(farm.KindBye):
		b, err := farm.DecodeBye(body)
		if err != nil {
			return err
		}
		a.onBye(from, b)
	case uint16(farm.KindDuplicate):
		d, err := farm.DecodeDuplicate(body)
		if err != nil {
			return err
		}
		if a.em == nil {
			a.beforeEM("duplicate_not_em", func() { a.em.Duplicate(d) })
			return nil
		}
		a.em.Duplicate(d)
	case uint16(farm.KindInventory):
		inv, err := farm.DecodeInventory(body)
		if err != nil {
			return err
		}
		if a.em == nil {
			a.beforeEM("inventory_not_em", func() { a.em.Inventory(inv) })
			return nil
		}
		a.em.Inventory(inv)
	default:
		return fmt.Errorf("unknown message type %d", typ)
	}
	return nil
}

// beforeEM keeps a message meant for the EM that reached this node before
// its own election result did (the others' leader watch can be faster):
// applied when it becomes EM, dropped (counted) if it does not.
func (a *Agent) beforeEM(why string, fn func()) {
	if a.cfg.Roles&farm.RoleEM == 0 || a.resigned || len(a.early2) >= maxBeforeEM {
		a.drop(why)
		return
	}
	a.early2 = append(a.early2, fn)
}

const maxBeforeEM = 1 << 16

func (a *Agent) onCredit(c farm.Credit) {
	if a.em == nil {
		a.beforeEM("credit_not_em", func() { a.em.Credit(c) })
		return
	}
	a.em.Credit(c)
}

func (a *Agent) onAssign(as farm.Assign) {
	if a.bu != nil && as.BU == a.cfg.Node {
		a.bu.Assign(as)
	}
	if a.ru != nil && a.proto == farm.Push {
		a.ru.Assign(as)
	}
}

func (a *Agent) onRequest(q farm.Request) {
	if a.ru == nil {
		a.drop("request_not_ru")
		return
	}
	a.ru.Assign(farm.Assign(q))
}

func (a *Agent) onRelease(r farm.Release) {
	if a.em == nil {
		a.beforeEM("release_not_em", func() { a.em.Release(r) })
		return
	}
	a.em.Release(r)
}

func (a *Agent) onRelay(r farm.Release) {
	if a.ru != nil {
		a.ru.Release(r)
	}
}

func (a *Agent) onAnnounce(an farm.Announce) {
	if a.em == nil {
		a.beforeEM("announce_not_em", func() { a.onAnnounce(an) })
		return
	}
	if err := a.em.Announce(an.Unit); err != nil {
		a.log.Warn("farm: bad announcement", "err", err)
		a.drop("bad_announcement")
	}
}
