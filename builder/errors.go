package builder

import "errors"

// Sentinel errors returned by the builder. Configuration problems are
// wrapped in an error that names the offending field.
var (
	// ErrClosed: the builder was closed; the fragment was discarded and
	// counted with reason "closed".
	ErrClosed = errors.New("builder: closed")
	// ErrTooLarge: a fragment payload of 4 GiB or more (sizes in event
	// batches are uint32); it was discarded and counted ("too_large").
	ErrTooLarge = errors.New("builder: fragment payload of 4 GiB or more")
	// ErrConfig: New was given an invalid Config.
	ErrConfig = errors.New("builder: invalid config")
	// ErrNotAssigned: Expect on a builder without Config.Assigned.
	ErrNotAssigned = errors.New("builder: not in assigned mode (Config.Assigned)")
	// ErrAssignment: Expect was given an assignment it cannot take (empty
	// or unordered ranges, an id already expected, too many ids); the
	// error names which.
	ErrAssignment = errors.New("builder: bad assignment")
)
