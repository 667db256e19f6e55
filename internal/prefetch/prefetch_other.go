//go:build !amd64

package prefetch

import "unsafe"

// Lines is a no-op where no prefetch instruction is wired.
func Lines(unsafe.Pointer, uintptr) {}
