// Package handshake runs the hello exchange of the peer protocol (package
// peer's doc: hello, hello_reply, proof, welcome or refuse) over any
// transport that can write and read whole frames, and counts refusals.
package handshake

import (
	"crypto/hmac"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/sluice-daq/sluice/node/peer"
	"github.com/sluice-daq/sluice/node/peer/internal/link"
	"github.com/sluice-daq/sluice/node/peer/internal/wire"
	"github.com/sluice-daq/sluice/schemas"
)

// FrameIO writes and reads whole control-path frames of one connection.
// Deadlines are the transport's business (ReadFrame returns an error when
// the handshake timed out).
type FrameIO interface {
	WriteFrame(frame []byte) error
	ReadFrame() (wire.Header, []byte, error)
}

// Peer is what the hello told about the other side.
type Peer struct {
	Node, Addr    string
	MaxData       int
	ControlWindow int
	Cookie        [wire.CookieSize]byte // from welcome (connector) or made (acceptor)
}

// Link are the parameters of the link of a Conn to p under cfg; onEnd runs
// once the Conn ended (the transport forgets it).
func (p Peer) Link(cfg *peer.Config, ctr *link.Counters, onEnd func()) link.Params {
	return link.Params{
		Node: p.Node, Addr: p.Addr, PeerMaxData: p.MaxData, PeerWindow: p.ControlWindow,
		Window: cfg.ControlWindow, SendQueue: cfg.SendQueue,
		Heartbeat: cfg.Heartbeat, PeerTimeout: cfg.PeerTimeout, Counters: ctr, OnEnd: onEnd,
	}
}

func myHello(cfg *peer.Config) wire.Hello {
	h := wire.Hello{Version: wire.Version, MaxData: uint32(cfg.MaxData), ControlWindow: uint32(cfg.ControlWindow),
		Farm: cfg.Farm, Node: cfg.Node, Addr: cfg.Advertise}
	rand.Read(h.Nonce[:])
	return h
}

// refuse counts the refusal, tells the other side (best effort) and
// returns the error.
func refuse(io FrameIO, ctr *link.Counters, reason, why string) error {
	ctr.CountRefused(reason)
	io.WriteFrame(wire.AppendRefuse(nil, wire.RefuseCode(reason), why))
	return fmt.Errorf("%w (%s): %s", peer.ErrRefused, reason, why)
}

// refused turns a received refuse frame into the error (counted).
func refused(ctr *link.Counters, body []byte) error {
	reason, text, err := wire.DecodeRefuse(body)
	if err != nil {
		reason, text = peer.RefusedMalformed, err.Error()
	}
	ctr.CountRefused(reason)
	return fmt.Errorf("%w (%s) by the peer: %s", peer.ErrRefused, reason, text)
}

// check is both sides' test of the other's hello.
func check(cfg *peer.Config, h *wire.Hello) (reason, why string) {
	if h.Farm != cfg.Farm {
		return peer.RefusedFarm, fmt.Sprintf("node %q is of farm %q, this is farm %q", h.Node, h.Farm, cfg.Farm)
	}
	if h.Node == cfg.Node {
		return peer.RefusedNode, fmt.Sprintf("node id %q is this node's own", h.Node)
	}
	return "", ""
}

func readKind(io FrameIO, want uint8) (wire.Header, []byte, error) {
	h, body, err := io.ReadFrame()
	if err != nil {
		return h, nil, err
	}
	if h.Kind != want && h.Kind != wire.KindRefuse {
		return h, nil, schemas.Errorf("peer handshake", "kind", 0, schemas.ErrInconsistent, "frame kind %d, want %d", h.Kind, want)
	}
	return h, body, nil
}

// decodeFailure names the refusal for a hello that did not decode.
func decodeFailure(err error) string {
	if errors.Is(err, schemas.ErrBadVersion) {
		return peer.RefusedVersion
	}
	return peer.RefusedMalformed
}

// NewCookie returns fresh random session cookie bytes.
func NewCookie() (c [wire.CookieSize]byte) {
	rand.Read(c[:])
	return c
}

// Connect runs the connector's side.
func Connect(io FrameIO, cfg *peer.Config, ctr *link.Counters) (Peer, error) {
	mine := myHello(cfg)
	if err := io.WriteFrame(wire.AppendFrame(nil, wire.KindHello, 0, wire.AppendHello(nil, &mine))); err != nil {
		return Peer{}, err
	}
	h, body, err := readKind(io, wire.KindHelloReply)
	if err != nil {
		return Peer{}, err
	}
	if h.Kind == wire.KindRefuse {
		return Peer{}, refused(ctr, body)
	}
	theirs, err := wire.DecodeHello(body, true)
	if err != nil {
		return Peer{}, refuse(io, ctr, decodeFailure(err), err.Error())
	}
	if reason, why := check(cfg, &theirs); reason != "" {
		return Peer{}, refuse(io, ctr, reason, why)
	}
	if !hmac.Equal(theirs.MAC, wire.MAC(cfg.Token, wire.RoleAcceptor, mine.Nonce, theirs.Nonce, cfg.Node, theirs.Node)) {
		return Peer{}, refuse(io, ctr, peer.RefusedToken, fmt.Sprintf("nodes %q and %q hold different farm tokens (check token or token_file on both)", cfg.Node, theirs.Node))
	}
	proof := wire.MAC(cfg.Token, wire.RoleConnector, mine.Nonce, theirs.Nonce, cfg.Node, theirs.Node)
	if err := io.WriteFrame(wire.AppendFrame(nil, wire.KindProof, 0, proof)); err != nil {
		return Peer{}, err
	}
	h, body, err = readKind(io, wire.KindWelcome)
	if err != nil {
		return Peer{}, err
	}
	if h.Kind == wire.KindRefuse {
		return Peer{}, refused(ctr, body)
	}
	p := Peer{Node: theirs.Node, Addr: theirs.Addr, MaxData: int(theirs.MaxData), ControlWindow: int(theirs.ControlWindow)}
	copy(p.Cookie[:], body)
	return p, nil
}

// Accept runs the acceptor's side, given the connector's hello frame body
// (the transport read the first frame to tell a hello from a join).
// reserve is asked for a place in the accept queue once the hello checked
// out; it returns false when the queue is full. On success the caller owns
// the reservation; if the welcome cannot be sent, Accept gives it back with
// unreserve. cookie goes into the welcome (a transport registers it before
// the connector can use it).
func Accept(io FrameIO, first []byte, cfg *peer.Config, ctr *link.Counters, cookie [wire.CookieSize]byte, reserve func() bool, unreserve func()) (Peer, error) {
	theirs, err := wire.DecodeHello(first, false)
	if err != nil {
		return Peer{}, refuse(io, ctr, decodeFailure(err), err.Error())
	}
	if reason, why := check(cfg, &theirs); reason != "" {
		return Peer{}, refuse(io, ctr, reason, why)
	}
	mine := myHello(cfg)
	mine.MAC = wire.MAC(cfg.Token, wire.RoleAcceptor, theirs.Nonce, mine.Nonce, theirs.Node, cfg.Node)
	if err := io.WriteFrame(wire.AppendFrame(nil, wire.KindHelloReply, 0, wire.AppendHello(nil, &mine))); err != nil {
		return Peer{}, err
	}
	h, body, err := readKind(io, wire.KindProof)
	if err != nil {
		return Peer{}, err
	}
	if h.Kind == wire.KindRefuse {
		return Peer{}, refused(ctr, body)
	}
	if !hmac.Equal(body, wire.MAC(cfg.Token, wire.RoleConnector, theirs.Nonce, mine.Nonce, theirs.Node, cfg.Node)) {
		return Peer{}, refuse(io, ctr, peer.RefusedToken, fmt.Sprintf("nodes %q and %q hold different farm tokens (check token or token_file on both)", cfg.Node, theirs.Node))
	}
	if !reserve() {
		return Peer{}, refuse(io, ctr, peer.RefusedAcceptQueue, fmt.Sprintf("%d peers already wait to be accepted", cfg.AcceptQueue))
	}
	p := Peer{Node: theirs.Node, Addr: theirs.Addr, MaxData: int(theirs.MaxData), ControlWindow: int(theirs.ControlWindow), Cookie: cookie}
	if err := io.WriteFrame(wire.AppendFrame(nil, wire.KindWelcome, 0, p.Cookie[:])); err != nil {
		unreserve()
		return Peer{}, err
	}
	return p, nil
}
