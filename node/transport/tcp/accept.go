package tcp

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// After a failed accept the input waits, as net/http's server does, 5 ms
// doubling up to 1 s, and tries again; an accepted connection resets the
// wait. Out of file descriptors (EMFILE), the kernel keeps the pending
// connection in the listen backlog: it is accepted once a descriptor is
// free, and the streams already open go on meanwhile.
const (
	minAcceptBackoff = 5 * time.Millisecond
	maxAcceptBackoff = time.Second
)

// acceptReason is the Stats.AcceptErrors key of a failed accept.
func acceptReason(err error) string {
	for _, r := range []struct {
		errno unix.Errno
		name  string
	}{
		{unix.EMFILE, "emfile"}, {unix.ENFILE, "enfile"}, {unix.ENOBUFS, "enobufs"},
		{unix.ENOMEM, "enomem"}, {unix.ECONNABORTED, "econnaborted"},
	} {
		if errors.Is(err, r.errno) {
			return r.name
		}
	}
	return "other"
}

// SetLogger gives the input the logger it reports failed accepts and
// refused connections to (transport.Logged); the node's limits repeated
// records per input and reason. Default: slog.Default(). Call before Run.
func (in *Input) SetLogger(l *slog.Logger) { in.log = l }

func (in *Input) logger() *slog.Logger {
	if in.log != nil {
		return in.log
	}
	return slog.Default()
}

// acceptFailed counts err, logs it and waits out the back-off (or ctx),
// returning the next back-off.
func (in *Input) acceptFailed(ctx context.Context, err error, delay time.Duration) time.Duration {
	reason := acceptReason(err)
	in.c.AcceptError(reason)
	delay = min(max(2*delay, minAcceptBackoff), maxAcceptBackoff)
	in.logger().Warn("readout input cannot accept a connection; backing off", "input", "tcp://"+in.ln.Addr().String(),
		"reason", reason, "error", err.Error(), "retry_in", delay.String(), "open", in.open.Load())
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return delay
}

// RefusedMaxConnections is the Stats.Refused reason of a connection
// closed at once because Options.MaxConnections were open.
const RefusedMaxConnections = "max_connections"

// refuse closes conn at once (a reset: the sender sees its connection
// refused, not a stream that stalls) because as many connections are open
// as the input takes (Options.MaxConnections), naming the setting the
// limit comes from.
func (in *Input) refuse(conn *net.TCPConn) {
	in.c.Refuse(RefusedMaxConnections)
	_ = conn.SetLinger(0)
	_ = conn.Close()
	limit, from := in.cfg.streams()
	in.logger().Warn("readout input refused a connection: max_connections open", "input", "tcp://"+in.ln.Addr().String(),
		"reason", RefusedMaxConnections, "max_connections", limit, "from", from, "remote", conn.RemoteAddr().String())
}

// ClosedPreambleTimeout is the Stats.Closed reason of a connection that
// sent no complete preamble within Options.PreambleTimeout.
const ClosedPreambleTimeout = "preamble_timeout"

// preambleFailed handles a connection whose preamble did not arrive: got
// bytes of it came before the read failed with err. A sender that closed
// before saying anything lost nothing and is not counted; one still
// silent at the deadline is closed (by serve) and counted and logged
// (rate-limited by the node, per input and reason), naming its remote
// address and the deadline.
func (in *Input) preambleFailed(conn *net.TCPConn, got int, err error) {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return
	}
	in.c.Close(ClosedPreambleTimeout)
	in.logger().Warn("readout input closed a connection that sent no preamble in time", "input", "tcp://"+in.ln.Addr().String(),
		"reason", ClosedPreambleTimeout, "remote", conn.RemoteAddr().String(), "preamble_timeout", in.cfg.PreambleTimeout.String(),
		"preamble_bytes_received", got)
}
