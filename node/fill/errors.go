package fill

import "errors"

// Sentinel errors (test with errors.Is; the wrapping error says where).
var (
	// ErrUnknownMode: a beam mode that is none of the LHC's (Mode).
	ErrUnknownMode = errors.New("unknown beam mode")
	// ErrSchedule: a schedule file that cannot be used: unreadable, not
	// the documented format, times out of order, fills overlapping.
	ErrSchedule = errors.New("bad accelerator schedule")
	// ErrSource: the accelerator state source did not answer, or answered
	// something that is not the documented JSON.
	ErrSource = errors.New("accelerator state source")
)
