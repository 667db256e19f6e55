package shm

import "errors"

// Sentinel errors of the ring. Callers test them with errors.Is; the
// returned errors wrap them with the ring name and pid involved.
var (
	// ErrWriterDead: the process writing a ring died or stopped updating
	// its heartbeat before closing the ring.
	ErrWriterDead = errors.New("readout ring writer is dead")
	// ErrReaderDead: the process reading a ring died or stopped updating
	// its heartbeat while the writer waited for ring space.
	ErrReaderDead = errors.New("readout ring reader is dead")
	// ErrReaderAttached: another live process already reads this ring.
	ErrReaderAttached = errors.New("readout ring already has a live reader")
	// ErrRingInUse: a ring file to be replaced is written or read by
	// another live process, or belongs to another user.
	ErrRingInUse = errors.New("readout ring is in use")
	// ErrBadRing: the ring file is not a sluice readout ring of a known
	// version, or its sizes are inconsistent.
	ErrBadRing = errors.New("not a valid readout ring")
)
