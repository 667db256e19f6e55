package tcp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/cms"
)

// FEROL framing (tcp://HOST:PORT?framing=ferol): each connection is one
// CMS FEROL -> DAQ stream as a FEROL sends it, FEROL blocks back to back
// (package schemas/cms documents them), with no preamble, no credits and
// no end-of-stream frame. The input reads the blocks across whatever read
// boundaries TCP gives, puts each first..last run back together into its
// FED fragment and hands it on as a one-fragment MFP: source = FED id,
// event id = the FEROL event number extended to 64 bits (cms.EventUnwrapper,
// per connection), payload = the whole FED fragment (header to trailer),
// as CMS's first-layer event builders (the evb readout units) key
// fragments by FED and event number. It checks every FED fragment's CRC-16
// and trailer: a bad one is handed on flagged schemas.FlagSourceError and
// counted by reason (transport.Stats.Flagged), so the builder marks its
// event. A FED fragment that does not decode is discarded (Malformed) and
// the stream goes on; a stream whose framing breaks (bad signature,
// inconsistent blocks, a fragment over credit_window) is counted Protocol
// and its connection closed; one cut inside a fragment,
// TruncatedAtDisconnect. A connection closed between fragments is a stream
// ended cleanly (expect_streams counts it).
//
// Flow control is TCP's own: a builder that does not take fragments stops
// the reads, the kernel's receive window fills and the FEROL waits.

// ferolWriteBuffer is a FEROL sender's write buffer per connection.
const ferolWriteBuffer = 64 << 10

// Reasons of Stats.Flagged for FEROL fragments.
const (
	FlagFEDCRC            = "fed_crc"
	FlagFEDErrorBits      = "fed_error_bits"
	FlagFEDHeaderMismatch = "fed_header_mismatch"
)

// endReader turns any read error into io.EOF for the FEROL reader (which
// then tells a stream that ended between fragments from one cut inside a
// block) and keeps the error, so that a connection reset is not taken for
// a clean end.
type endReader struct {
	r   io.Reader
	err error
	end *connEnd // its rx counts the bytes read
}

func (e *endReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	e.end.rx += int64(n)
	if err != nil {
		if e.err == nil {
			e.err = err
		}
		err = io.EOF
	}
	return n, err
}

// serveFEROL reads one FEROL stream. It returns whether the stream ended
// cleanly (the sender closed it between fragments), and an error only when
// the sink failed.
func (in *Input) serveFEROL(ctx context.Context, conn *net.TCPConn, sink transport.Sink, end *connEnd) (bool, error) {
	src := &endReader{r: conn, end: end}
	fr := cms.NewFEROLReader(bufio.NewReaderSize(src, in.sizes.chunk))
	fr.MaxFragment = int(in.cfg.CreditWindow)
	var events cms.EventUnwrapper
	for {
		f, err := fr.Next()
		if err == io.EOF {
			if src.err != io.EOF {
				end.gone(src.err)
				return false, nil // reset or closed by the node: not a clean end
			}
			in.c.StreamEnded()
			end.reason = ClosedEndOfStream
			return true, nil
		}
		if err != nil {
			if ctx.Err() == nil {
				in.ferolStreamBroken(err)
			}
			if src.err != nil && src.err != io.EOF {
				err = fmt.Errorf("%w (the read: %v)", err, src.err)
			}
			end.protocol(err)
			if errors.Is(err, schemas.ErrTruncated) {
				end.reason = ClosedTruncated
			}
			return false, nil
		}
		_, chk, err := cms.CheckFEROLFragment(&f)
		if err != nil {
			in.c.Discard(transport.Malformed)
			in.logger().Warn("readout input discarded a FED fragment that does not decode", "input", in.uri(),
				"remote", conn.RemoteAddr().String(), "fed", f.FEDID, "event", f.Event, "error", err.Error())
			continue
		}
		var flags schemas.FragmentFlag
		if chk.Flagged() {
			flags = schemas.FlagSourceError
			for _, r := range []struct {
				bad    bool
				reason string
			}{{chk.BadCRC, FlagFEDCRC}, {chk.ErrorBits, FlagFEDErrorBits}, {chk.Mismatch, FlagFEDHeaderMismatch}} {
				if r.bad {
					in.c.Flag(r.reason)
				}
			}
		}
		// The reader's buffer is reused by the next fragment: the packet
		// is a copy the sink keeps until it releases it.
		b := schemas.AppendMFP(make([]byte, 0, schemas.MFPHeaderSize+8+len(f.Data)+8), uint32(f.FEDID), events.Event(f.Event), flags, 3, [][]byte{f.Data}, nil)
		p, _, err := schemas.DecodeMFP(b)
		if err != nil {
			return false, fmt.Errorf("readout %s: re-encoding FED %d event %d: %w", in.uri(), f.FEDID, f.Event, err) // not reached: AppendMFP's output decodes
		}
		n := int64(len(b))
		in.c.Hold(n)
		if err := in.c.HandWire(ctx, sink, p, func() { in.c.Hold(-n) }, int(fr.Offset()-f.Offset)); err != nil {
			if ctx.Err() != nil {
				return false, nil
			}
			end.reason, end.err = ClosedSinkError, err
			return false, err
		}
	}
}

// ferolStreamBroken counts a FEROL stream that cannot go on: cut inside a
// block or fragment (TruncatedAtDisconnect), or framed other than a FEROL
// frames (Protocol). The connection's close record (connClosed) says so,
// with the error: one record, not two.
func (in *Input) ferolStreamBroken(err error) {
	reason := transport.Protocol
	if errors.Is(err, schemas.ErrTruncated) {
		reason = transport.TruncatedAtDisconnect
	}
	in.c.Discard(reason)
}

func (in *Input) uri() string { return "tcp://" + in.ln.Addr().String() + "?framing=" + FramingFEROL }

// FEROLSender sends FEROL streams as a FEROL does (tcp://...?framing=ferol):
// each packet is the FEROL blocks of one FED fragment, written as they
// are; a source's packets always go on the same connection. There is no
// preamble and no credit: TCP's window throttles it (the time Write
// blocks is counted as throttling).
type FEROLSender struct {
	addr       string
	sockBuf    int
	conns      []*ferolConn
	reconnects int
}

type ferolConn struct {
	conn     *net.TCPConn
	w        *bufio.Writer
	throttle time.Duration
}

// NewFEROLSender opens connections streams to addr (0: min(sources, 4)),
// each with an SO_SNDBUF of socketBuffer bytes (0: the system's).
func NewFEROLSender(ctx context.Context, addr string, connections, sources, socketBuffer int) (*FEROLSender, error) {
	k := connections
	if k <= 0 {
		k = max(min(sources, 4), 1)
	}
	s := &FEROLSender{addr: addr, sockBuf: socketBuffer}
	for range k {
		c, err := s.dial(ctx)
		if err != nil {
			for _, c := range s.conns {
				c.conn.Close()
			}
			return nil, err
		}
		s.conns = append(s.conns, c)
	}
	return s, nil
}

func (s *FEROLSender) dial(ctx context.Context) (*ferolConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return nil, fmt.Errorf("ferol tcp://%s: %w", s.addr, err)
	}
	tc := c.(*net.TCPConn)
	if s.sockBuf > 0 {
		_ = tc.SetWriteBuffer(s.sockBuf)
	}
	return &ferolConn{conn: tc, w: bufio.NewWriterSize(tc, ferolWriteBuffer)}, nil
}

func (s *FEROLSender) conn(p transport.Packet) int { return int(p.Source) % len(s.conns) }

// Send writes p's FEROL blocks on its source's connection.
func (s *FEROLSender) Send(ctx context.Context, p transport.Packet) error {
	c := s.conns[s.conn(p)]
	t0 := time.Now()
	_, err := c.w.Write(p.Bytes)
	c.throttle += time.Since(t0)
	if err != nil {
		return fmt.Errorf("ferol tcp://%s: %w", s.addr, err)
	}
	return ctx.Err()
}

// SendTruncated writes the first cut bytes of p, then closes the
// connection at once, as a FEROL that lost its link mid-fragment, and opens
// a new one for the source's later packets.
func (s *FEROLSender) SendTruncated(ctx context.Context, p transport.Packet, cut int) error {
	i := s.conn(p)
	c := s.conns[i]
	if _, err := c.w.Write(p.Bytes[:cut]); err != nil {
		return fmt.Errorf("ferol tcp://%s: %w", s.addr, err)
	}
	if err := c.w.Flush(); err != nil {
		return fmt.Errorf("ferol tcp://%s: %w", s.addr, err)
	}
	c.conn.Close()
	next, err := s.dial(ctx)
	if err != nil {
		return err
	}
	next.throttle = c.throttle
	s.conns[i] = next
	s.reconnects++
	return nil
}

// Flush writes out what every connection buffered.
func (s *FEROLSender) Flush() error {
	for _, c := range s.conns {
		if err := c.w.Flush(); err != nil {
			return fmt.Errorf("ferol tcp://%s: %w", s.addr, err)
		}
	}
	return nil
}

// Close flushes every connection, closes its sending side (the stream's
// end) and waits until the receiver closed it, or ctx ends.
func (s *FEROLSender) Close(ctx context.Context, _ uint64) error {
	first := s.Flush()
	for _, c := range s.conns {
		if err := c.conn.CloseWrite(); err != nil && first == nil {
			first = fmt.Errorf("ferol tcp://%s: %w", s.addr, err)
		}
	}
	for _, c := range s.conns {
		stop := context.AfterFunc(ctx, func() { c.conn.Close() })
		_, _ = io.Copy(io.Discard, c.conn) // the receiver closes once it read the stream
		stop()
		c.conn.Close()
	}
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// Stats are the time writes blocked (TCP's window full) and the
// reconnections after truncations.
func (s *FEROLSender) Stats() transport.SenderStats {
	var st transport.SenderStats
	for _, c := range s.conns {
		st.ThrottleNs += uint64(c.throttle)
	}
	st.Reconnects = s.reconnects
	return st
}
