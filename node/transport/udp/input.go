package udp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"

	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/node/transport/internal/rxbuf"
	"github.com/sluice-daq/sluice/node/transport/internal/sock"

	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/vdif"
)

// UDP readout datagrams: an 8-byte little-endian sequence number (one
// sequence per sender address, incremented per datagram, like VTP) followed
// by the payload: one MFP (format=mfp) or one VDIF frame (format=vtp, which
// is then exactly VTP). A datagram of only the 8 bytes is an end marker:
// its number is the count of datagrams the sender numbered, so missing
// ones at the end of the stream are counted too.
const (
	seqSize = 8
	// udpHeadroom is free space kept in front of each datagram in its
	// buffer, so a decoder can write an MFP header before a VDIF frame
	// without copying the frame: 32 + the 8 sequence bytes = the 40 bytes
	// of a one-fragment MFP's header and arrays.
	udpHeadroom = 32
	// MaxDatagram is the largest UDP payload over IPv4.
	MaxDatagram = 65507
)

// DatagramDecoder turns one datagram, b[off:] (its 8-byte sequence number
// included), into the packet handed to the sink, aliasing b; b[:off] is
// free headroom it may write. Errors are *schemas.DecodeError.
type DatagramDecoder func(b []byte, off int) (schemas.MFP, error)

// DecodeMFPDatagram: the payload is exactly one MFP.
func DecodeMFPDatagram(b []byte, off int) (schemas.MFP, error) {
	rec := b[off+seqSize:]
	p, n, err := schemas.DecodeMFP(rec)
	if err == nil && n != len(rec) {
		err = schemas.Errorf("mfp", "packet", int64(n), schemas.ErrInconsistent, "%d bytes after a packet of %d", len(rec)-n, n)
	}
	return p, schemas.WithOffset(err, seqSize)
}

// DecodeVTPDatagram: the datagram is VTP (one VDIF frame). The frame
// becomes a one-fragment MFP (source and event id from vdif.FrameFragment)
// whose header is written into the headroom, so the frame is not copied.
// off must be >= 32.
func DecodeVTPDatagram(b []byte, off int) (schemas.MFP, error) {
	_, f, err := vdif.DecodeVTP(b[off:])
	if err != nil {
		return schemas.MFP{}, err
	}
	frag := vdif.FrameFragment(&f)
	const hdr = schemas.MFPHeaderSize + 8
	start := off + seqSize - hdr
	if start < 0 {
		return schemas.MFP{}, fmt.Errorf("udp: DecodeVTPDatagram needs %d bytes of headroom, has %d", hdr-seqSize, off)
	}
	h := b[start : off+seqSize]
	le := binary.LittleEndian
	le.PutUint32(h[0:], schemas.MFPMagic)
	h[4], h[5] = schemas.MFPVersion, 0
	le.PutUint16(h[6:], uint16(frag.Flags))
	le.PutUint32(h[8:], frag.SourceID)
	le.PutUint32(h[12:], 1)
	le.PutUint64(h[16:], frag.EventID)
	le.PutUint32(h[24:], uint32(hdr+len(frag.Payload)))
	le.PutUint32(h[28:], 0)
	le.PutUint32(h[32:], uint32(len(frag.Payload)))
	le.PutUint32(h[36:], frag.CRC)
	p, _, err := schemas.DecodeMFP(b[start:])
	return p, err
}

// Input receives readout datagrams (udp://HOST:PORT).
type Input struct {
	conn   *net.UDPConn
	cfg    Options
	decode DatagramDecoder // by cfg.Format
	c      transport.Counters
	pool   rxbuf.Pool
	rcvbuf int
}

// Listen listens on addr (HOST:PORT; port 0 picks one, see Addr) with the
// settings of cfg (zero values take the defaults) and requests
// Options.SocketBuffer bytes of receive buffer, forcing it past
// net.core.rmem_max when the process may (CAP_NET_ADMIN); the size the
// kernel granted is in Stats.SocketBufferBytes.
func Listen(addr string, cfg Options) (*Input, error) {
	cfg = cfg.withDefaults()
	la, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("readout udp://%s: %w", addr, err)
	}
	conn, err := net.ListenUDP("udp", la)
	if err != nil {
		return nil, fmt.Errorf("readout udp://%s: %w", addr, err)
	}
	in := &Input{conn: conn, cfg: cfg, decode: DecodeMFPDatagram}
	if cfg.Format == FormatVTP {
		in.decode = DecodeVTPDatagram
	}
	in.pool.Held = &in.c
	// SO_RCVBUFFORCE passes net.core.rmem_max but needs CAP_NET_ADMIN;
	// without it the plain request is capped at rmem_max.
	forced := false
	if rc, err := conn.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			forced = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, int(cfg.SocketBuffer)) == nil
		})
	}
	if !forced {
		conn.SetReadBuffer(int(cfg.SocketBuffer))
	}
	in.rcvbuf, _ = sock.Option(conn, unix.SO_RCVBUF)
	return in, nil
}

// Addr is the address the input listens on.
func (in *Input) Addr() net.Addr { return in.conn.LocalAddr() }

// ListenAddr is Addr as host:port (transport.Listener).
func (in *Input) ListenAddr() string { return in.conn.LocalAddr().String() }

// Close closes the socket (Run closes it itself when it returns; Close is
// for an input whose Run never ran). Idempotent.
func (in *Input) Close() error {
	if err := in.conn.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// Stats returns the counters.
func (in *Input) Stats() transport.Stats {
	s := in.c.Snapshot()
	s.SocketBufferBytes = in.rcvbuf
	s.ExpectStreams = in.cfg.ExpectStreams
	return s
}

// recvBatch is how many datagrams one recvmmsg(2) call may return.
const recvBatch = 32

// Run receives datagrams, puts each sender's back in sequence order within
// the reorder window and latency budget, and hands them to sink, until ctx
// ends or Options.ExpectStreams senders sent their end marker (nil), or the
// sink fails (its error). It closes the socket when it returns.
// Datagrams are read up to recvBatch per system call (recvmmsg via
// golang.org/x/net), each into its own pooled buffer.
func (in *Input) Run(ctx context.Context, sink transport.Sink) error {
	defer in.conn.Close()
	stop := context.AfterFunc(ctx, func() { in.conn.Close() })
	defer stop()
	var pc interface {
		ReadBatch([]ipv4.Message, int) (int, error)
	} = ipv4.NewPacketConn(in.conn)
	if a, ok := in.conn.LocalAddr().(*net.UDPAddr); ok && a.IP.To4() == nil {
		pc = ipv6.NewPacketConn(in.conn)
	}
	msgs := make([]ipv4.Message, recvBatch)
	bufs := make([]*rxbuf.Buf, recvBatch)
	space := udpHeadroom + int(in.cfg.MaxDatagram)
	for i := range msgs {
		bufs[i] = in.pool.Get(space)
		msgs[i].Buffers = [][]byte{bufs[i].B[udpHeadroom:space]}
	}
	defer func() {
		for _, b := range bufs {
			b.Put()
		}
	}()
	r := udpReceiver{in: in, ctx: ctx, sink: sink, streams: map[netip.AddrPort]*seqWindow{}}
	var deadline time.Time // the read deadline set on the socket
	for {
		// Wake up when the oldest held datagram's latency budget runs out.
		var due time.Time
		for _, w := range r.streams {
			if w.held > 0 && (due.IsZero() || w.due.Before(due)) {
				due = w.due
			}
		}
		if !due.Equal(deadline) {
			in.conn.SetReadDeadline(due)
			deadline = due
		}
		n, err := pc.ReadBatch(msgs, 0)
		now := time.Now()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if err := r.expire(now); err != nil {
					return err
				}
				continue
			}
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("readout udp://%s: %w", in.conn.LocalAddr(), err)
		}
		for i := range n {
			var from netip.AddrPort
			if a, ok := msgs[i].Addr.(*net.UDPAddr); ok {
				from = a.AddrPort()
			}
			done, err := r.datagram(bufs[i], msgs[i].N, from, now)
			// The buffer now belongs to the window or the sink: take a fresh one.
			bufs[i] = in.pool.Get(space)
			msgs[i].Buffers[0] = bufs[i].B[udpHeadroom:space]
			if err != nil || done {
				return err
			}
		}
	}
}

// udpReceiver is the per-Run state of a UDP input.
type udpReceiver struct {
	in      *Input
	ctx     context.Context
	sink    transport.Sink
	streams map[netip.AddrPort]*seqWindow
	ended   int
}

// deliver decodes a datagram the window released and hands it on.
func (r *udpReceiver) deliver(b *rxbuf.Buf, n int) error {
	in := r.in
	p, err := in.decode(b.B[:udpHeadroom+n], udpHeadroom)
	if err != nil {
		in.c.DiscardDecodeError(err)
		b.Put()
		return nil
	}
	// The whole buffer is held, not only the datagram's n bytes: that is
	// the memory the builder keeps until it releases the packet.
	b.Hold(len(b.B), nil)
	return in.c.Hand(r.ctx, r.sink, p, b.Release)
}

// datagram takes one received datagram of n bytes in b (ownership passes
// to the window, the sink or the pool); done reports that the last
// expected stream ended.
func (r *udpReceiver) datagram(b *rxbuf.Buf, n int, from netip.AddrPort, now time.Time) (done bool, err error) {
	in := r.in
	if n < seqSize {
		in.c.Discard(transport.Malformed)
		b.Put()
		return false, nil
	}
	seq := binary.LittleEndian.Uint64(b.B[udpHeadroom:])
	w := r.streams[from]
	if w == nil {
		w = newSeqWindow(in.cfg.ReorderWindow, seq, &in.c)
		r.streams[from] = w
	}
	if n > seqSize {
		return false, w.add(seq, b, n, now.Add(in.cfg.LatencyBudget), r.deliver)
	}
	// An end marker.
	b.Put()
	if w.ended {
		return false, nil
	}
	w.ended = true
	in.c.StreamEnded()
	if err := w.flush(seq, r.deliver); err != nil {
		return false, err
	}
	r.ended++
	return in.cfg.ExpectStreams > 0 && r.ended == in.cfg.ExpectStreams, nil
}

// expire flushes the windows whose oldest datagram has used its budget.
func (r *udpReceiver) expire(now time.Time) error {
	for _, w := range r.streams {
		if w.held > 0 && !now.Before(w.due) {
			if err := w.flush(w.highest+1, r.deliver); err != nil {
				return err
			}
		}
	}
	return nil
}
