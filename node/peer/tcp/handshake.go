package tcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/sluice-daq/sluice/node/peer"
	"github.com/sluice-daq/sluice/node/peer/internal/handshake"
	"github.com/sluice-daq/sluice/node/peer/internal/wire"
)

// sockIO reads and writes whole frames on a socket without buffering, so
// no byte of what follows the handshake is left in a buffer.
type sockIO struct {
	c   *net.TCPConn
	lim wire.Limits
}

func (s sockIO) WriteFrame(b []byte) error {
	_, err := s.c.Write(b)
	return err
}

func (s sockIO) ReadFrame() (wire.Header, []byte, error) {
	var hb [wire.HeaderSize]byte
	if _, err := io.ReadFull(s.c, hb[:]); err != nil {
		return wire.Header{}, nil, err
	}
	h, err := wire.ParseHeader(hb[:], s.lim)
	if err != nil {
		return h, nil, err
	}
	if h.Kind == wire.KindData || h.Kind == wire.KindControl {
		return h, nil, fmt.Errorf("%w: frame kind %d during the handshake", peer.ErrProtocol, h.Kind)
	}
	body := make([]byte, h.Length)
	_, err = io.ReadFull(s.c, body)
	return h, body, err
}

// serveHandshake reads an accepted connection's first frame: a hello
// starts a Conn (whose data connection joins later), a join completes one.
func (t *Transport) serveHandshake(c *net.TCPConn) {
	deadline := time.Now().Add(t.cfg.HandshakeTimeout)
	c.SetDeadline(deadline)
	fio := sockIO{c: c, lim: t.lim}
	h, body, err := fio.ReadFrame()
	if err != nil || (h.Kind != wire.KindHello && h.Kind != wire.KindJoin) {
		t.ctr.CountRefused(peer.RefusedMalformed)
		t.untrack(c)
		c.Close()
		return
	}
	if h.Kind == wire.KindJoin {
		var cookie [wire.CookieSize]byte
		copy(cookie[:], body)
		t.mu.Lock()
		ch := t.joins[cookie]
		delete(t.joins, cookie)
		delete(t.sockets, c)
		t.mu.Unlock()
		if ch == nil {
			t.ctr.CountRefused(peer.RefusedMalformed)
			c.Close()
			return
		}
		ch <- c
		return
	}
	cookie := handshake.NewCookie()
	joined := make(chan *net.TCPConn, 1)
	t.mu.Lock()
	t.joins[cookie] = joined
	t.mu.Unlock()
	forget := func() {
		t.mu.Lock()
		delete(t.joins, cookie)
		t.mu.Unlock()
	}
	place := t.reg.Reservation()
	p, err := handshake.Accept(fio, body, &t.cfg, &t.ctr, cookie, place.Reserve, place.Unreserve)
	if err != nil {
		forget()
		t.untrack(c)
		c.Close()
		return
	}
	var data *net.TCPConn
	select {
	case data = <-joined:
	case <-time.After(time.Until(deadline)):
	case <-t.closed:
	}
	forget()
	t.untrack(c)
	if data == nil {
		// A join may have been handed over just now.
		select {
		case data = <-joined:
			data.Close()
		default:
		}
		place.Unreserve()
		t.ctr.CountRefused(peer.RefusedMalformed)
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	data.SetDeadline(time.Time{})
	conn, ok := t.startConn(p, c, data)
	if !ok {
		place.Unreserve()
		return
	}
	place.Push(conn)
}

// Connect dials addr and runs the hello exchange.
func (t *Transport) Connect(ctx context.Context, addr string) (peer.Conn, error) {
	if t.isDone() {
		return nil, fmt.Errorf("%w: transport %s", peer.ErrClosed, t.addr)
	}
	ctx, cancel := context.WithTimeout(ctx, t.cfg.HandshakeTimeout)
	defer cancel()
	d := net.Dialer{Control: setBuffers}
	dial := func() (*net.TCPConn, error) {
		nc, err := d.DialContext(ctx, "tcp", addr)
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) {
			return nil, fmt.Errorf("peer tcp: connect %s: %w (%v)", addr, peer.ErrUnreachable, err)
		}
		if err != nil {
			return nil, fmt.Errorf("peer tcp: connect %s: %w", addr, err)
		}
		c := nc.(*net.TCPConn)
		if !t.track(c) {
			return nil, fmt.Errorf("%w: transport %s", peer.ErrClosed, t.addr)
		}
		if dl, ok := ctx.Deadline(); ok {
			c.SetDeadline(dl)
		}
		return c, nil
	}
	ctl, err := dial()
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { ctl.SetDeadline(time.Now()) })
	p, err := handshake.Connect(sockIO{c: ctl, lim: t.lim}, &t.cfg, &t.ctr)
	stop()
	if err != nil {
		t.untrack(ctl)
		ctl.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("peer tcp: connect %s: %w (%v)", addr, ctx.Err(), err)
		}
		return nil, fmt.Errorf("peer tcp: connect %s: %w", addr, err)
	}
	data, err := dial()
	if err == nil {
		_, err = data.Write(wire.AppendFrame(nil, wire.KindJoin, 0, p.Cookie[:]))
		if err != nil {
			t.untrack(data)
			data.Close()
		}
	}
	t.untrack(ctl)
	if err != nil {
		ctl.Close()
		return nil, fmt.Errorf("peer tcp: connect %s: data connection: %w", addr, err)
	}
	t.untrack(data)
	ctl.SetDeadline(time.Time{})
	data.SetDeadline(time.Time{})
	conn, ok := t.startConn(p, ctl, data)
	if !ok {
		return nil, fmt.Errorf("%w: transport %s", peer.ErrClosed, t.addr)
	}
	t.ctr.Connected.Add(1)
	return conn, nil
}
