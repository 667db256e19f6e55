//go:build !amd64

package builder

import "unsafe"

// prefetch is a no-op where no prefetch instruction is wired.
func prefetch(unsafe.Pointer, uintptr) {}
