package peer

// Buffer is a data message's payload in a slot of the receiving transport's
// receive pool. The bytes stay valid, and the slot taken, until Release.
type Buffer interface {
	// Bytes is the payload, at the slot's address (no copy was made).
	Bytes() []byte
	// Release gives the slot back to the pool, which lets throttled
	// senders go on. Call it exactly once; a second call panics (it would
	// hand the same memory out twice).
	Release()
}
