package main

import (
	"log/slog"

	"golang.org/x/sys/unix"
)

// raiseFileLimit raises the soft limit on open files to the hard limit and
// says what the node runs with: every network connection and store file
// takes a descriptor, and a node out of them can only make senders wait
// (its inputs back off and count accept_errors "emfile"). The Go runtime
// already raises the soft limit to one below the hard limit at start (and
// restores it for the plugin processes it starts), so only a limit lower
// than that is set here.
func raiseFileLimit(log *slog.Logger) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn("cannot read the open-file limit", "error", err.Error())
		return
	}
	if lim.Cur+1 >= lim.Max {
		log.Info("open-file limit", "soft", lim.Cur, "hard", lim.Max)
		return
	}
	from := lim.Cur
	lim.Cur = lim.Max
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn("cannot raise the open-file limit to the hard limit", "soft", from, "hard", lim.Max, "error", err.Error())
		return
	}
	log.Info("open-file limit raised to the hard limit", "soft", lim.Cur, "hard", lim.Max, "raised_from", from)
}
