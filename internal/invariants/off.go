//go:build !invariants

package invariants

// Enabled reports whether the invariants build tag is set.
const Enabled = false
