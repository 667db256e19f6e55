// Package invariants switches on expensive self-checks of the builder, the
// readout ring and the store, in the habit of cockroachdb/pebble: code
// guards a full consistency check with `if invariants.Enabled { ... }`, which
// the compiler removes from normal builds. `make test` runs the property and
// fuzz tests with `-tags invariants`, so that a broken invariant fails at
// the operation that broke it rather than as a wrong count at the end.
//
// A failed check panics with Violation: an invariant is a statement about the
// code, not about its input, so no input may ever trigger one.
package invariants

import "fmt"

// Violation is the panic value of a failed check.
type Violation struct {
	Where string // the component, e.g. "builder"
	What  string // the broken statement with the values seen
}

func (v Violation) Error() string { return "invariant violated in " + v.Where + ": " + v.What }

// Failf panics with a Violation.
func Failf(where, format string, args ...any) {
	panic(Violation{Where: where, What: fmt.Sprintf(format, args...)})
}
