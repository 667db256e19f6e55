package tcp

import (
	"context"
	"errors"
	"io"
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

// Reasons of Stats.Closed: every connection the input accepted (and did
// not refuse) is counted under one of them once it closes.
const (
	// ClosedPreambleTimeout: no complete preamble within
	// Options.PreambleTimeout; the input closed it.
	ClosedPreambleTimeout = "preamble_timeout"
	// ClosedEOFBeforePreamble: the sender closed (or reset) it before
	// sending a byte.
	ClosedEOFBeforePreamble = "eof_before_preamble"
	// ClosedEOFInPreamble: the sender closed (or reset) it after part of
	// a preamble.
	ClosedEOFInPreamble = "eof_in_preamble"
	// ClosedBadPreamble: the first 8 bytes are not a readout stream's
	// magic and version (an HTTP request, a FEROL stream on a readout
	// input); the input reset it.
	ClosedBadPreamble = "bad_preamble"
	// ClosedEndOfStream: the stream ended cleanly (its end-of-stream
	// frame; FEROL: the sender closed it between fragments).
	ClosedEndOfStream = "end_of_stream"
	// ClosedPeerClosed: the sender closed it between records, without an
	// end-of-stream frame.
	ClosedPeerClosed = "peer_closed"
	// ClosedReadError: a read failed other than at the sender's close (a
	// reset: ECONNRESET, ETIMEDOUT).
	ClosedReadError = "read_error"
	// ClosedTruncated: the sender closed or reset it inside a record
	// (counted as well as a TruncatedAtDisconnect discard).
	ClosedTruncated = "truncated"
	// ClosedProtocol: the stream broke the protocol (a record kind it
	// does not have, a frame beyond its credit, FEROL framing that does
	// not decode); the input closed it.
	ClosedProtocol = "protocol"
	// ClosedSinkError: the sink failed; the input stops.
	ClosedSinkError = "sink_error"
	// ClosedShutdown: the input stopped (its context ended, or its
	// expected streams ended) while the connection was open.
	ClosedShutdown = "shutdown"
)

// closedReasons are the Stats.Closed keys, present from the start.
var closedReasons = []string{
	ClosedPreambleTimeout, ClosedEOFBeforePreamble, ClosedEOFInPreamble, ClosedBadPreamble, ClosedEndOfStream,
	ClosedPeerClosed, ClosedReadError, ClosedTruncated, ClosedProtocol, ClosedSinkError, ClosedShutdown,
}

// connEnd is how one connection ended: the Stats.Closed reason, the error
// that says why (nil when the reason does), and the bytes received on it.
type connEnd struct {
	reason   string
	err      error
	rx       int64
	preamble bool // it ended before its preamble was complete
}

// preambleFailed: got bytes of the preamble came before the read failed
// with err.
func (e *connEnd) preambleFailed(got int, err error) {
	e.rx, e.preamble = int64(got), true
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		e.reason = ClosedPreambleTimeout
	case got == 0:
		e.reason = ClosedEOFBeforePreamble
	default:
		e.reason = ClosedEOFInPreamble
	}
	if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.Is(err, os.ErrDeadlineExceeded) {
		e.err = err
	}
}

// gone: a read after the preamble failed with err.
func (e *connEnd) gone(err error) {
	if err == io.EOF {
		e.reason = ClosedPeerClosed
		return
	}
	e.reason, e.err = ClosedReadError, err
}

func (e *connEnd) protocol(err error) { e.reason, e.err = ClosedProtocol, err }

// connClosed counts (Stats.Closed) and logs a connection that ends as end
// says, before the input closes it; the node limits repeated records per
// input and reason. A connection that ends while the input stops is
// counted as ClosedShutdown whatever its read saw. Clean ends and
// shutdowns log at Info, and so does a connect-and-close (nothing sent,
// nothing lost); the rest at Warn, each naming the remote address
// and the bytes received.
func (in *Input) connClosed(ctx context.Context, conn *net.TCPConn, end *connEnd) {
	reason := end.reason
	if ctx.Err() != nil && reason != ClosedEndOfStream && reason != ClosedSinkError {
		reason, end.err = ClosedShutdown, nil
	}
	if reason == "" {
		reason = ClosedReadError // not reached: every return of serve says why
	}
	in.c.Close(reason)
	input := "tcp://" + in.ln.Addr().String()
	if in.cfg.Framing == FramingFEROL {
		input = in.uri()
	}
	args := []any{"input", input, "reason", reason, "remote", conn.RemoteAddr().String(), "bytes_received", end.rx}
	if end.err != nil {
		args = append(args, "error", end.err.Error())
	}
	if end.preamble {
		args = append(args, "preamble_bytes_received", end.rx)
	}
	if reason == ClosedPreambleTimeout {
		args = append(args, "preamble_timeout", in.cfg.PreambleTimeout.String())
	}
	// A connect-and-close sent nothing, so nothing was lost (a port
	// probe, a sender giving up before it began): Info, as a clean end.
	if reason == ClosedEndOfStream || reason == ClosedShutdown || reason == ClosedEOFBeforePreamble {
		in.logger().Info("readout input closed a connection", args...)
		return
	}
	in.logger().Warn("readout input closed a connection", args...)
}
