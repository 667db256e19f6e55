package farm

import "errors"

// Sentinel errors of the farm package. Decoding errors are
// *schemas.DecodeError (see the package doc); these are the rest.
var (
	// ErrEncode: a message cannot be encoded as given (a string longer
	// than 255 bytes, an empty node id, ranges out of order, ...). The
	// wrapping error names the field.
	ErrEncode = errors.New("farm: cannot encode message")
	// ErrConfigMismatch: a node's view of the run configuration differs
	// from the farm's; the wrapping error lists the differences.
	ErrConfigMismatch = errors.New("farm: run configuration differs")
)
