package storage

import (
	"errors"
	"fmt"
)

// Sentinel errors of the store. Errors returned by the store wrap one of
// them (test with errors.Is); value decoding errors are *schemas.DecodeError.
var (
	// ErrDiskBudget: the write would leave less free space on the store's
	// file system than Options.MinFreeBytes, or grow the store beyond
	// Options.MaxStoreBytes. The write was refused; nothing of it is stored.
	// The concrete error is a *DiskBudgetError.
	ErrDiskBudget = errors.New("disk budget exceeded")
	// ErrSchemaMismatch: a batch's source groups or mode differ from the
	// ones the store was created with.
	ErrSchemaMismatch = errors.New("event schema differs from the store's")
	// ErrStoreVersion: the store was written with a value encoding version
	// this build does not read.
	ErrStoreVersion = errors.New("unsupported store encoding version")
	// ErrAlreadyCommitted: a replayed batch names an event that is no longer
	// in the deferred stream (its outcome was committed already); the
	// commit was not applied.
	ErrAlreadyCommitted = errors.New("event no longer deferred")
	// ErrNeedsRecovery: a read-only open found logs of a process that did
	// not close the store (killed, crashed); only a read-write open, which
	// drops the unacknowledged tail of the logs, can recover it.
	ErrNeedsRecovery = errors.New("store needs recovery")
	// ErrLocked: another process (a running node, a replay) holds the
	// store's directory lock.
	ErrLocked = errors.New("store in use by another process")
	// ErrClosed: the store has been closed.
	ErrClosed = errors.New("store closed")
	// ErrNotAStore: a read-only open of a directory that holds no store
	// (no badger MANIFEST): not one `sluice run` wrote.
	ErrNotAStore = errors.New("not a sluice store")
	// ErrNoEvent: the store holds no event of that run and event id in
	// any stream (Why).
	ErrNoEvent = errors.New("no such event in the store")
)

// DiskBudgetError says which limit refused a write and by how much.
type DiskBudgetError struct {
	Dir       string
	Need      uint64 // bytes the refused write would have added (estimate)
	Free      uint64 // bytes available to the store on its file system
	MinFree   uint64 // Options.MinFreeBytes
	Size      uint64 // the guard's count of the store's bytes: its files as last scanned plus admitted writes not yet seen there (a batch landing during a scan is counted in both until its write ends: an overestimate)
	MaxSize   uint64 // Options.MaxStoreBytes (0: no limit)
	BySizeCap bool   // true if MaxStoreBytes, not MinFreeBytes, refused it
}

func (e *DiskBudgetError) Error() string {
	if e.BySizeCap {
		return fmt.Sprintf("store %s: %v: store uses %d bytes, writing %d more would pass the limit of %d bytes (max store bytes)",
			e.Dir, ErrDiskBudget, e.Size, e.Need, e.MaxSize)
	}
	return fmt.Sprintf("store %s: %v: %d bytes free, writing %d more would leave less than the limit of %d bytes (min free bytes)",
		e.Dir, ErrDiskBudget, e.Free, e.Need, e.MinFree)
}

func (e *DiskBudgetError) Unwrap() error { return ErrDiskBudget }
