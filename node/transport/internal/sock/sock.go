// Package sock reads socket options of the network inputs.
package sock

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// Option reads an integer SOL_SOCKET option of c.
func Option(c syscall.Conn, opt int) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var v int
	var serr error
	err = rc.Control(func(fd uintptr) { v, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, opt) })
	if err != nil {
		return 0, err
	}
	return v, serr
}
