package plugins

import (
	"os/exec"
	"syscall"
)

// dieWithHost asks the kernel to SIGKILL the plugin when the host dies, so
// that a node killed with SIGKILL leaves no orphan plugins behind.
func dieWithHost(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
