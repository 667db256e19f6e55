package peer

import "errors"

// Sentinel errors. Errors returned by transports wrap one of them (test with
// errors.Is) and say what and which peer.
var (
	// ErrClosed: the Transport or Conn was closed by this process.
	ErrClosed = errors.New("peer: closed")
	// ErrPeerClosed: the peer said goodbye (closed its Conn or Transport).
	ErrPeerClosed = errors.New("peer: closed by the peer")
	// ErrPeerLost: the peer vanished without goodbye: its connection reset,
	// its endpoint failed, it broke the protocol, or it fell silent for
	// Config.PeerTimeout (ErrHeartbeat, wrapped together with this).
	ErrPeerLost = errors.New("peer: peer lost")
	// ErrHeartbeat: nothing arrived from the peer for Config.PeerTimeout.
	ErrHeartbeat = errors.New("peer: no heartbeat")
	// ErrUnreachable: nothing accepted the connection at the address (the
	// port is closed: connection refused; or the host cannot be reached).
	// Nothing was exchanged with a peer.
	ErrUnreachable = errors.New("peer: connection refused")
	// ErrRefused: the hello exchange failed: another farm, a wrong token,
	// another protocol version, the same node id, a full accept queue.
	ErrRefused = errors.New("peer: refused")
	// ErrProtocol: a frame that does not decode or breaks the protocol (the
	// Conn is then lost with it).
	ErrProtocol = errors.New("peer: protocol violation")
	// ErrTooLarge: a control body above MaxControl, a header above
	// MaxHeader, or a payload above the peer's MaxData.
	ErrTooLarge = errors.New("peer: message too large")
	// ErrNotRegistered: SendData's slice is not inside a live Region of
	// this transport.
	ErrNotRegistered = errors.New("peer: memory not registered with this transport")
	// ErrRegionBusy: a Region was closed while sends from it were in flight.
	ErrRegionBusy = errors.New("peer: region has sends in flight")
	// ErrRegionOpen: the Transport was closed while Regions the caller
	// registered were still open.
	ErrRegionOpen = errors.New("peer: regions still open at close")
	// ErrConfig: a Config field out of range (the error names it).
	ErrConfig = errors.New("peer: bad config")
	// ErrUnknownTransport: Open was given a name no transport registered
	// (e.g. "ucx" in a binary built without the ucx tag: the error then
	// says how to build one with it).
	ErrUnknownTransport = errors.New("peer: unknown transport")
)
