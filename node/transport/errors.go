package transport

import "errors"

// Sentinel errors shared by the transports. Callers test them with
// errors.Is; the returned errors wrap them with the URI, ring name or
// address involved. Errors that belong to one transport (a ring's writer
// that died) are in its package.
var (
	// ErrBadURI: an input or sender URI that cannot be parsed, names no
	// registered transport, or has options its transport does not take.
	ErrBadURI = errors.New("bad transport URI")
	// ErrPacketTooLarge: a packet does not fit the ring, the credit window
	// of a TCP receiver, or a UDP datagram.
	ErrPacketTooLarge = errors.New("packet too large")
	// ErrNoTruncation: the transport cannot carry a packet cut short.
	ErrNoTruncation = errors.New("truncation cannot be injected")
	// ErrOptions: options of another transport given to a transport.
	ErrOptions = errors.New("options of another transport")
)
