package plugins

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// dieWithHost asks the kernel to SIGKILL the plugin when the host dies, so
// that a node killed with SIGKILL leaves no orphan plugins behind.
func dieWithHost(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// renice sets the nice value of every thread of process pid (Linux keeps
// one per thread, and a thread starts with its creator's: threads the
// process makes later inherit it). With idle the threads also get the
// SCHED_IDLE policy: they run only on a core no other thread wants.
func renice(pid, nice int, idle bool) error {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range tasks {
		tid, aerr := strconv.Atoi(t.Name())
		if aerr != nil {
			continue
		}
		var err error
		if idle {
			err = unix.SchedSetAttr(tid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE, Nice: int32(nice)}, 0)
		} else {
			err = syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice)
		}
		if err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("thread %d: %w", tid, err))
		}
	}
	return errors.Join(errs...)
}
