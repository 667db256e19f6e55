// Package decodetest holds the assertions every decoder test of the format
// packages makes about errors: a *schemas.DecodeError wrapping the right
// sentinel at the right byte offset.
package decodetest

import (
	"errors"
	"testing"

	"github.com/sluice-daq/sluice/schemas"
)

// Want fails t unless err is a *schemas.DecodeError wrapping sentinel at
// byte offset off, and returns it.
func Want(t testing.TB, err, sentinel error, off int64) *schemas.DecodeError {
	t.Helper()
	var de *schemas.DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("error %v (%T), want a *schemas.DecodeError wrapping %v", err, err, sentinel)
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v does not wrap %v", err, sentinel)
	}
	if de.Offset != off {
		t.Fatalf("error %v at offset %d, want %d", err, de.Offset, off)
	}
	return de
}

// Check is the fuzz targets' assertion: err is nil, or a
// *schemas.DecodeError whose offset lies within the n-byte input (0..n).
func Check(t testing.TB, err error, n int) {
	t.Helper()
	if err == nil {
		return
	}
	var de *schemas.DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("error %v (%T) is not a *schemas.DecodeError", err, err)
	}
	if de.Offset < 0 || de.Offset > int64(n) {
		t.Fatalf("error offset %d outside the %d-byte input: %v", de.Offset, n, err)
	}
}
