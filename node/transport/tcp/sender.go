package tcp

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-daq/sluice/node/transport"
)

// Stream is the sending side of one connection of the TCP readout stream
// protocol (see the package documentation): what a readout board runs; a
// Sender spreads sources over several. Not safe for concurrent use.
type Stream struct {
	addr    string
	sobuf   int
	version int // StreamVersion2, or StreamVersion1 for a receiver that reads only it
	wire    wire
	conn    *net.TCPConn
	bw      *bufio.Writer
	window  int64
	avail   atomic.Int64 // credit granted and not yet used
	wake    chan struct{}
	closed  chan struct{} // closed when the receiver side of conn ends
	// A frame's header and the writev of a large frame, kept so that
	// sending allocates nothing: hdr's first u32 is the frame's length,
	// the rest zero.
	hdr  [wireAlign]byte
	iovs [3][]byte
	iov  net.Buffers
	// ThrottleNs is the time Send waited for credit; Reconnects counts new
	// connections after the first; Resent counts packets sent again after
	// a connection failed under them.
	throttle   time.Duration
	reconnects int
	resent     int
}

// ReconnectTimeout bounds how long a sender retries connecting.
const ReconnectTimeout = 10 * time.Second

// reconnectTimeout is ReconnectTimeout, shorter in tests.
var reconnectTimeout = ReconnectTimeout

// Dial connects to a TCP input at addr (HOST:PORT), sends the preamble
// of version 2 of the stream and waits for the first credit grant.
// socketBuffer is the SO_SNDBUF requested (0: the system default).
func Dial(ctx context.Context, addr string, socketBuffer int) (*Stream, error) {
	return DialVersion(ctx, addr, socketBuffer, StreamVersion2)
}

// DialVersion is Dial sending stream version (StreamVersion1, as older
// senders do and as a receiver that reads only version 1 wants, or
// StreamVersion2). Errors: a version that is neither, or a failure to
// connect within ReconnectTimeout.
func DialVersion(ctx context.Context, addr string, socketBuffer, version int) (*Stream, error) {
	s := &Stream{addr: addr, sobuf: socketBuffer, version: version}
	switch version {
	case StreamVersion1:
		s.wire = wireV1
	case StreamVersion2:
		s.wire = wireV2
	default:
		return nil, fmt.Errorf("readout tcp://%s: stream version %d: want %d or %d", addr, version, StreamVersion1, StreamVersion2)
	}
	if err := s.connect(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// connect dials (retrying until ReconnectTimeout) and waits for the window.
func (s *Stream) connect(ctx context.Context) error {
	deadline := time.Now().Add(reconnectTimeout)
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", s.addr)
		if err == nil {
			if err = s.start(ctx, c.(*net.TCPConn)); err == nil {
				return nil
			}
			c.Close()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			if errors.Is(err, errReceiverClosed) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
				return fmt.Errorf("readout tcp://%s: the receiver accepted and closed every connection before granting credit, retried for %s: it refused them (check the node's max_connections against the connections sent) or is not a readout input: %w",
					s.addr, reconnectTimeout, err)
			}
			return fmt.Errorf("readout tcp://%s: %w", s.addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *Stream) start(ctx context.Context, c *net.TCPConn) error {
	if s.sobuf > 0 {
		c.SetWriteBuffer(s.sobuf)
	}
	pre := make([]byte, 8, preambleV2)
	binary.LittleEndian.PutUint32(pre[0:], tcpMagic)
	binary.LittleEndian.PutUint32(pre[4:], uint32(s.version))
	if s.wire == wireV2 {
		pre = pre[:preambleV2] // the reserved bytes, zero
	}
	if _, err := c.Write(pre); err != nil {
		return err
	}
	s.conn, s.bw = c, bufio.NewWriterSize(c, 256<<10)
	s.avail.Store(0)
	s.wake = make(chan struct{}, 1)
	s.closed = make(chan struct{})
	go s.readGrants(c, s.wake, s.closed)
	if err := s.waitCredit(ctx, 1, false); err != nil {
		return err
	}
	s.window = s.avail.Load()
	return nil
}

// readGrants adds every credit grant of connection c to avail.
func (s *Stream) readGrants(c *net.TCPConn, wake chan<- struct{}, closed chan<- struct{}) {
	defer close(closed)
	br := bufio.NewReaderSize(c, 4096)
	var msg [8]byte
	for {
		if _, err := io.ReadFull(br, msg[:]); err != nil {
			return
		}
		s.avail.Add(int64(binary.LittleEndian.Uint64(msg[:])))
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// errReceiverClosed: the receiver closed the connection while the sender
// waited for credit (the callers name the stream).
var errReceiverClosed = errors.New("receiver closed the connection")

// waitCredit waits until n bytes of credit are available, flushing what is
// buffered first so the receiver can release it. ask: a version 2 stream
// says so first (a "credit wanted" record), so that the receiver, which
// batches its grants, grants as soon as it has the credit for n.
func (s *Stream) waitCredit(ctx context.Context, n int64, ask bool) error {
	if s.avail.Load() >= n {
		return nil
	}
	if ask && s.wire == wireV2 {
		var rec [wireAlign]byte // a header alone
		binary.LittleEndian.PutUint32(rec[0:], uint32(n))
		binary.LittleEndian.PutUint32(rec[4:], recordCreditWanted)
		s.bw.Write(rec[:])
	}
	if err := s.bw.Flush(); err != nil {
		return err
	}
	t0 := time.Now()
	defer func() { s.throttle += time.Since(t0) }()
	for s.avail.Load() < n {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.closed:
			if s.avail.Load() >= n {
				return nil
			}
			return errReceiverClosed
		case <-s.wake:
		}
	}
	return nil
}

// Send sends packet p (one MFP) as one frame, waiting for credit first
// (the time is counted in ThrottleNs). If the connection fails it
// reconnects and sends p again. Errors: transport.ErrPacketTooLarge (p larger than
// the receiver's window), ctx.Err(), or a failure to reconnect.
func (s *Stream) Send(ctx context.Context, p []byte) error {
	if len(p) == 0 || int64(len(p)) > s.window || len(p) > 1<<32-1 {
		return fmt.Errorf("readout tcp://%s: %w: %d bytes, credit window %d", s.addr, transport.ErrPacketTooLarge, len(p), s.window)
	}
	for {
		err := s.waitCredit(ctx, int64(len(p)), true)
		if err == nil {
			err = s.writeFrame(p, len(p))
		}
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := s.reconnect(ctx); err != nil {
			return err
		}
		s.resent++
	}
}

// zeros is the padding of version 2 records.
var zeros [wireAlign]byte

// writeFrame writes the header of p and its first cut bytes, and the
// padding after them when that is all of p.
func (s *Stream) writeFrame(p []byte, cut int) error {
	binary.LittleEndian.PutUint32(s.hdr[:], uint32(len(p))) // the rest stays zero: recordFrame, reserved
	hdr := s.hdr[:s.wire.header]
	var pad []byte
	if cut == len(p) {
		pad = zeros[:s.wire.record(len(p))-s.wire.header-len(p)]
	}
	s.avail.Add(-int64(len(p)))
	if cut < largeWrite {
		s.bw.Write(hdr)
		s.bw.Write(p[:cut])
		_, err := s.bw.Write(pad)
		return err
	}
	if err := s.bw.Flush(); err != nil {
		return err
	}
	s.iovs = [3][]byte{hdr, p[:cut], pad}
	s.iov = s.iovs[:]
	_, err := s.iov.WriteTo(s.conn) // consumes s.iov, not s.iovs
	s.iovs = [3][]byte{}            // keeps no reference to p
	return err
}

// SendTruncated is fault injection: it sends the length prefix of p and
// only its first cut bytes, then drops the connection and reconnects, as a
// board that reset mid-packet. The receiver counts the packet as
// truncated_at_disconnect.
func (s *Stream) SendTruncated(ctx context.Context, p []byte, cut int) error {
	if err := s.waitCredit(ctx, int64(len(p)), true); err != nil {
		return fmt.Errorf("readout tcp://%s: %w", s.addr, err)
	}
	err := s.writeFrame(p, cut)
	if err == nil {
		err = s.bw.Flush()
	}
	if err != nil {
		return err
	}
	// Half-close and wait for the receiver to close: closing at once could
	// reset the connection (unread credit grants make close(2) send RST),
	// and a reset discards the whole packets before the cut one that the
	// receiver has not read yet.
	s.conn.CloseWrite()
	select {
	case <-s.closed:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.reconnect(ctx)
}

// reconnect closes the current connection and dials again.
func (s *Stream) reconnect(ctx context.Context) error {
	s.conn.Close()
	<-s.closed
	s.reconnects++
	return s.connect(ctx)
}

// Close ends the stream cleanly (an end-of-stream frame), waits until the
// receiver closed its side (so everything sent was read) or ctx ends, and
// closes the connection.
func (s *Stream) Close(ctx context.Context) error {
	defer s.conn.Close()
	s.bw.Write(zeros[:s.wire.header]) // a frame of length 0
	if err := s.bw.Flush(); err != nil {
		return fmt.Errorf("readout tcp://%s: %w", s.addr, err)
	}
	s.conn.CloseWrite()
	select {
	case <-s.closed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Flush writes out what Send buffered (small packets go out in batches).
func (s *Stream) Flush() error {
	if err := s.bw.Flush(); err != nil {
		return fmt.Errorf("readout tcp://%s: %w", s.addr, err)
	}
	return nil
}

// ThrottleNs is the total time Send waited for credit.
func (s *Stream) ThrottleNs() uint64 { return uint64(s.throttle) }

// Reconnects is the number of connections made after the first.
func (s *Stream) Reconnects() int { return s.reconnects }

// Resent counts packets sent again after their connection failed.
func (s *Stream) Resent() int { return s.resent }
