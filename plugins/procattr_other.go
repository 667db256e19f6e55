//go:build !linux

package plugins

import "os/exec"

// dieWithHost has no kernel support outside Linux; plugins built with the
// SDK notice that their parent is gone and exit by themselves.
func dieWithHost(*exec.Cmd) {}

// renice does nothing outside Linux: the shadow runs at the node's priority.
func renice(pid, nice int, idle bool) error { return nil }
