//go:build !amd64

package shm

import "unsafe"

// evict is a no-op where no cache-line flush instruction is wired.
func evict(unsafe.Pointer, uintptr) {}
