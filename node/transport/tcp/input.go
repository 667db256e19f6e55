package tcp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/node/transport/internal/rxbuf"
	"github.com/sluice-daq/sluice/node/transport/internal/sock"
)

// The TCP readout stream (see the package documentation for its byte
// tables): a preamble declares the version, then records.
const (
	tcpMagic uint32 = 0x53544C53
	// largeWrite: frames at least this big are written with writev
	// straight from the caller's bytes instead of through the bufio buffer.
	largeWrite = 16 << 10
)

// Versions of the TCP readout stream, the preamble's version (see the
// package documentation); the input reads both.
const (
	// StreamVersion1: frames are a u32 length and the MFP, one credit
	// grant whenever the sink holds nothing more of the connection. What
	// older senders send; SenderOptions.StreamVersion 1 sends it.
	StreamVersion1 = 1
	// StreamVersion2: records of a wireAlign-byte header and the payload
	// padded to a multiple of wireAlign, grants batched and a "credit
	// wanted" record from a sender that waits. What Dial sends.
	StreamVersion2 = 2
)

// Version 2's layout: the preamble (magic, version, reserved zeros), a
// record's header (length, kind, reserved zeros) and its payload with its
// zero padding are each a multiple of wireAlign bytes, so every payload
// starts at a multiple of it in the stream and in every write the sender
// makes of whole records: the kernel copies it into the socket's pages,
// which the sender's threads share between connections, and out of them
// into the receiver's chunk at aligned offsets.
const (
	wireAlign  = 64
	preambleV2 = wireAlign
)

// Record kinds of version 2 (the header's second u32).
const (
	// recordFrame: L bytes of one MFP follow; L = 0 ends the stream.
	recordFrame uint32 = 0
	// recordCreditWanted: the sender waits for credit for a frame of L
	// bytes; no payload (the record is its header).
	recordCreditWanted uint32 = 1
)

// wire is the record layout of one version.
type wire struct {
	header int // bytes of a record's header before its payload
	align  int // a record's bytes are a multiple of this (a power of two)
}

var (
	wireV1 = wire{header: 4, align: 1}
	wireV2 = wire{header: wireAlign, align: wireAlign}
)

// record is the bytes of a record with an l-byte payload, padding included.
func (w wire) record(l int) int { return (w.header + l + w.align - 1) &^ (w.align - 1) }

// Input listens for readout streams (tcp://HOST:PORT), one connection
// per source or board, any number at once, reconnections included.
type Input struct {
	ln          *net.TCPListener
	cfg         Options
	c           transport.Counters
	pool        rxbuf.Pool
	outstanding atomic.Int64 // credit granted to open connections and not yet used
	rcvbuf      atomic.Int64
	open        atomic.Int64                      // connections accepted and not yet closed (Options.MaxConnections)
	versions    [StreamVersion2 + 1]atomic.Uint64 // streams accepted, by the version of their preamble
	log         *slog.Logger
	sizes       chunkSizes
	frames      sync.Pool // *frameRef, released frames for reuse
}

// Listen listens on addr (HOST:PORT; port 0 picks one, see Addr) with the
// settings of cfg (zero values take the defaults).
func Listen(addr string, cfg Options) (*Input, error) {
	cfg = cfg.withDefaults()
	// The receive buffer is set on the listening socket: accepted
	// connections inherit it, and only a buffer set before the handshake
	// lets the kernel negotiate a window scale that uses it.
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, int(cfg.SocketBuffer)) })
	}}
	l, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("readout tcp://%s: %w", addr, err)
	}
	ln := l.(*net.TCPListener)
	in := &Input{ln: ln, cfg: cfg, sizes: chunkSizesFor(int64(cfg.CreditWindow)), frames: sync.Pool{New: newFrameRef}}
	in.pool.Held = &in.c
	return in, nil
}

// Addr is the address the input listens on.
func (in *Input) Addr() net.Addr { return in.ln.Addr() }

// ListenAddr is Addr as host:port (transport.Listener).
func (in *Input) ListenAddr() string { return in.ln.Addr().String() }

// Close stops listening (Run closes the listener itself when it returns;
// Close is for an input whose Run never ran). Idempotent.
func (in *Input) Close() error {
	if err := in.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// Stats returns the counters.
func (in *Input) Stats() transport.Stats {
	s := in.c.Snapshot()
	s.CreditsOutstanding = in.outstanding.Load()
	s.SocketBufferBytes = int(in.rcvbuf.Load())
	s.ExpectStreams = in.cfg.ExpectStreams
	for v := range in.versions {
		if n := in.versions[v].Load(); n > 0 {
			if s.ConnectionsByVersion == nil {
				s.ConnectionsByVersion = map[int]uint64{}
			}
			s.ConnectionsByVersion[v] = n
		}
	}
	// The one reason a TCP input refuses for, at 0 until it occurs, so that
	// its metric exists from the start.
	if s.Refused == nil {
		s.Refused = map[string]uint64{}
	}
	s.Refused[RefusedMaxConnections] += 0
	// Every reason a connection closes for, likewise.
	if s.Closed == nil {
		s.Closed = map[string]uint64{}
	}
	for _, r := range closedReasons {
		s.Closed[r] += 0
	}
	if in.cfg.Framing == FramingFEROL {
		// Every reason a FEROL input flags, at 0 until it occurs, so that
		// its metrics exist from the start.
		if s.Flagged == nil {
			s.Flagged = map[string]uint64{}
		}
		for _, r := range []string{FlagFEDCRC, FlagFEDErrorBits, FlagFEDHeaderMismatch} {
			s.Flagged[r] += 0
		}
	}
	return s
}

// Run accepts connections and hands their packets to sink until ctx ends
// or Options.ExpectStreams streams have ended (nil), or the sink fails (its
// error). It closes the listener when it returns.
func (in *Input) Run(ctx context.Context, sink transport.Sink) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopAccept := context.AfterFunc(ctx, func() { in.ln.Close() })
	defer stopAccept()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer in.ln.Close()
	var ended atomic.Int64
	var delay time.Duration // back-off after a failed accept (accept.go)
	for {
		conn, err := in.ln.AcceptTCP()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("readout tcp://%s: accept: %w", in.ln.Addr(), err)
			}
			// Out of descriptors or buffers: the open streams go on.
			delay = in.acceptFailed(ctx, err, delay)
			continue
		}
		delay = 0
		if m, _ := in.cfg.streams(); in.open.Load() >= int64(m) {
			in.refuse(conn)
			continue
		}
		in.c.Connected()
		in.open.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			cleanEnd, err := in.serve(ctx, conn, sink)
			if err != nil {
				cancel(err)
				return
			}
			if cleanEnd && in.cfg.ExpectStreams > 0 && ended.Add(1) == int64(in.cfg.ExpectStreams) {
				cancel(nil)
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && err != context.Canceled {
		return err
	}
	return nil
}

// tcpConn is the receiving side of one connection.
type tcpConn struct {
	in       *Input
	conn     *net.TCPConn
	avail    atomic.Int64 // credit granted and not yet used
	returned atomic.Int64 // credit to grant back; negative while pinned chunks are owed (see leave)
	held     atomic.Int64 // bytes handed to the sink, not yet released
	wanted   atomic.Int64 // version 2: the credit the sender said it waits for, 0 when none
	batch    int64        // grant once this much was returned (or see due)
	wire     wire         // the stream's version
	wake     chan struct{}
}

// serve reads one connection's frames. It returns whether the stream ended
// with an end-of-stream frame, and an error only when the sink failed.
// Every connection is counted once it closes, under the reason it closed
// for (Stats.Closed, connClosed), before the input closes it.
func (in *Input) serve(ctx context.Context, conn *net.TCPConn, sink transport.Sink) (bool, error) {
	in.c.Opened(1)
	defer in.c.Opened(-1)
	// The connection leaves the open count before it is closed: a sender
	// reconnects once it sees the close, and its new connection must not
	// find the old one still counted against max_connections.
	closeConn := sync.OnceFunc(func() { in.open.Add(-1); conn.Close() })
	defer closeConn()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	var end connEnd
	count := sync.OnceFunc(func() { in.connClosed(ctx, conn, &end) })
	defer count()
	if n, err := sock.Option(conn, unix.SO_RCVBUF); err == nil {
		in.rcvbuf.Store(int64(n))
	}
	if in.cfg.Framing == FramingFEROL {
		return in.serveFEROL(ctx, conn, sink, &end)
	}
	var pre [preambleV2]byte
	conn.SetReadDeadline(time.Now().Add(in.cfg.PreambleTimeout))
	if n, err := io.ReadFull(conn, pre[:8]); err != nil {
		end.preambleFailed(n, err)
		return false, nil // gone, or silent, before saying anything: nothing lost
	}
	end.rx = 8
	wv := wireV1
	v := binary.LittleEndian.Uint32(pre[4:])
	switch {
	case binary.LittleEndian.Uint32(pre[0:]) != tcpMagic || (v != StreamVersion1 && v != StreamVersion2):
		in.c.Discard(transport.Protocol)
		end.reason = ClosedBadPreamble
		end.err = fmt.Errorf("preamble % x is not a readout stream's (magic %08x, version %d or %d)", pre[:8], tcpMagic, StreamVersion1, StreamVersion2)
		return false, nil
	case v == StreamVersion2:
		wv = wireV2
		if n, err := io.ReadFull(conn, pre[8:]); err != nil {
			end.preambleFailed(8+n, err)
			return false, nil // gone before its first frame: nothing lost
		}
		end.rx = preambleV2
	}
	conn.SetReadDeadline(time.Time{})
	in.versions[v].Add(1)
	in.logger().Info("readout input accepted a stream", "input", "tcp://"+in.ln.Addr().String(),
		"remote", conn.RemoteAddr().String(), "version", v, "open", in.open.Load())
	tc := &tcpConn{in: in, conn: conn, wake: make(chan struct{}, 1), batch: int64(in.cfg.CreditWindow / 8), wire: wv}
	done := make(chan struct{})
	grantsDone := make(chan struct{})
	go tc.grants(done, grantsDone)
	defer func() {
		close(done)
		count()
		closeConn() // unblocks a grant write to a sender that stopped reading
		<-grantsDone
		in.outstanding.Add(-tc.avail.Load())
	}()
	tc.returned.Add(int64(in.cfg.CreditWindow)) // the initial grant goes out like any other
	tc.signal()

	return in.readFrames(ctx, tc, sink, &end)
}

// readFrames reads the connection's records into chunks and hands each
// complete frame on as a view of its chunk: one read(2) takes whatever has
// arrived, many frames at once, and a frame is copied only when it
// straddles the end of a chunk (the bytes already received move to the
// start of the next one, or of this one). Chunks start at page boundaries
// and records start at multiples of wireAlign in a version 2 stream, so
// its payloads start at multiples of wireAlign in memory. A chunk goes back to the pool when
// the reader has left it and the sink released every frame in it; while
// the sink still holds a frame of a chunk the reader left, the whole chunk
// counts against the connection's credit window (leave), so that frames
// held by the builder pin at most the window's bytes of chunks, not a
// chunk each. It returns whether the stream ended cleanly, and an error
// only when the sink failed.
func (in *Input) readFrames(ctx context.Context, tc *tcpConn, sink transport.Sink, end *connEnd) (bool, error) {
	sz, wv := in.sizes, tc.wire
	ch := in.newChunk(sz.chunk)
	defer func() { tc.leave(ch) }()
	r, w := 0, 0 // ch.b[r:w] is received and not yet handed on
	for {
		// Invariant: r is at a record boundary.
		need := wv.header // bytes the record at r needs in this chunk
	records:
		for w-r >= wv.header {
			l := int64(binary.LittleEndian.Uint32(ch.b[r:]))
			kind := recordFrame
			if wv == wireV2 {
				kind = binary.LittleEndian.Uint32(ch.b[r+4:])
			}
			switch {
			case kind == recordCreditWanted:
				if l == 0 || l > int64(in.cfg.CreditWindow) {
					in.c.Discard(transport.Protocol) // wants what no grant can give
					end.protocol(fmt.Errorf("credit wanted for %d bytes, credit window %d", l, in.cfg.CreditWindow))
					return false, nil
				}
				if need = wv.record(0); w-r < need {
					break records
				}
				r += need
				need = wv.header
				tc.want(l)
				continue
			case kind != recordFrame:
				in.c.Discard(transport.Protocol)
				end.protocol(fmt.Errorf("record kind %d", kind))
				return false, nil
			case l == 0:
				in.c.StreamEnded()
				end.reason = ClosedEndOfStream
				return true, nil
			case l > tc.avail.Load():
				in.c.Discard(transport.Protocol) // sender ignored its credit
				end.protocol(fmt.Errorf("frame of %d bytes with %d bytes of credit", l, tc.avail.Load()))
				return false, nil
			}
			need = wv.record(int(l))
			if w-r < need {
				break
			}
			tc.avail.Add(-l)
			in.outstanding.Add(-l)
			tc.held.Add(l)
			in.c.Hold(l)
			ch.refs.Add(1)
			ch.held.Add(l)
			f := in.frames.Get().(*frameRef)
			f.tc, f.c, f.l = tc, ch, l
			frame := ch.b[r+wv.header : r+wv.header+int(l) : r+wv.header+int(l)]
			r += need
			need = wv.header
			if err := in.c.Deliver(ctx, sink, frame, f.release); err != nil {
				if ctx.Err() != nil {
					return false, nil
				}
				end.reason, end.err = ClosedSinkError, err
				return false, err
			}
		}
		switch {
		case r > 0 && w-r <= sz.maxTailMove && ch.refs.Load() == 1:
			// Nothing aliases the chunk: reuse it from its start, so a
			// sink that releases promptly keeps the reader in the same
			// few cache-warm pages instead of streaming through the chunk.
			copy(ch.b, ch.b[r:w])
			r, w = 0, w-r
		case r+need > len(ch.b) || len(ch.b)-w < sz.minRead:
			// Move the start of the record at r to a fresh chunk.
			next := in.newChunk(max(sz.chunk, need))
			copy(next.b, ch.b[r:w])
			tc.leave(ch)
			ch, r, w = next, 0, w-r
		}
		// Read up to maxRead bytes, or, for a record of at least minRead,
		// up to its end and the next header: the read that completes a
		// large frame then leaves only a header behind to move above.
		upto := w + sz.maxRead
		if need >= sz.minRead {
			upto = r + need + wv.header
		}
		upto = min(upto, len(ch.b))
		n, err := tc.conn.Read(ch.b[w:upto])
		w += n
		end.rx += int64(n)
		if err != nil && n == 0 {
			if w > r && !(wv == wireV2 && w-r >= 8 && binary.LittleEndian.Uint32(ch.b[r+4:]) == recordCreditWanted) {
				in.c.Discard(transport.TruncatedAtDisconnect)
				end.gone(err)
				end.reason = ClosedTruncated
				return false, nil
			}
			end.gone(err)
			return false, nil
		}
	}
}

// frameRef is what releases one frame handed to the sink: its bytes from
// the held count and its chunk, its credit back to its connection. The
// input reuses them (Input.frames), each with its release func made once,
// so that handing on a frame allocates nothing.
type frameRef struct {
	tc      *tcpConn
	c       *chunk
	l       int64
	release func() // f.done, bound once when f is made
}

func newFrameRef() any {
	f := &frameRef{}
	f.release = f.done
	return f
}

// done releases the frame and puts f back for another; the sink calls it
// (as the release func it was handed) exactly once.
func (f *frameRef) done() {
	tc, c, l := f.tc, f.c, f.l
	f.tc, f.c = nil, nil
	tc.in.frames.Put(f)
	tc.in.c.Hold(-l)
	c.held.Add(-l)
	tc.returnCredit(int(l))
	c.unref()
}

// chunkSizes are the sizes of an input's receive chunks, from its credit
// window: chunk is the usual size (a frame larger than that gets a chunk
// of its own size), a chunk with less than minRead bytes of room left is
// replaced rather than read into with small reads, and one read takes at
// most maxRead bytes of small frames, which keeps a reader whose sink
// releases promptly within a few cache-warm pages. A partial frame of at
// most maxTailMove bytes is moved to the start of its chunk when the sink
// has released everything before it.
type chunkSizes struct{ chunk, minRead, maxRead, maxTailMove int }

// Chunk size limits: maxChunk for large windows (1 MiB at the default
// 8 MiB), at least minChunk; between, an eighth of the window.
const (
	maxChunk = 1 << 20
	minChunk = 4 << 10
)

// chunkSizesFor scales the chunks to the window: a chunk an eighth of it
// (a power of two, 4 KiB to 1 MiB), so that a connection's memory, its
// window of pinned chunks (see leave) plus the chunk it reads into, is at
// most 9/8 of the window for frames up to a chunk's size. The read sizes
// keep their proportions to the 1 MiB chunk: 64 and 256 KiB there.
func chunkSizesFor(window int64) chunkSizes {
	c := maxChunk
	for c > minChunk && int64(c) > window/8 {
		c >>= 1
	}
	return chunkSizes{chunk: c, minRead: c / 16, maxRead: c / 4, maxTailMove: min(4<<10, c/16)}
}

// chunk is a pooled receive buffer that the reader and the frames handed
// out of it share.
type chunk struct {
	buf  *rxbuf.Buf
	b    []byte
	refs atomic.Int32 // the reader's reference plus one per frame not released
	held atomic.Int64 // bytes of the frames not released
	owed int64        // credit withheld for it since the reader left it (leave)
	tc   *tcpConn     // the connection owed is withheld from
}

func (in *Input) newChunk(size int) *chunk {
	buf := in.pool.Get(size)
	c := &chunk{buf: buf, b: buf.B}
	c.refs.Store(1)
	return c
}

// leave drops the reader's reference to c. If frames of it are still held,
// the rest of the chunk is withheld from the connection's credit until the
// last of them is released: the chunk stays in memory for them, and a
// connection whose frames the builder keeps (waiting for other sources)
// must not pin a chunk for each of them beyond its window. The frames' own
// bytes are already counted as used credit; a frame released before owed
// is set is counted twice for a moment (its credit returns at once), which
// errs by at most one chunk.
func (tc *tcpConn) leave(c *chunk) {
	if c.refs.Load() > 1 {
		c.owed = max(0, int64(len(c.b))-c.held.Load())
		c.tc = tc
		tc.returned.Add(-c.owed)
	}
	c.unref()
}

func (c *chunk) unref() {
	if c.refs.Add(-1) == 0 {
		if c.owed > 0 {
			c.tc.returned.Add(c.owed)
			c.tc.signal()
		}
		c.buf.Put()
	}
}

// returnCredit is called when the sink released n bytes of this
// connection; the grants goroutine sends them back to the sender (due).
func (tc *tcpConn) returnCredit(n int) {
	held := tc.held.Add(-int64(n))
	if tc.due(tc.returned.Add(int64(n)), held) {
		tc.signal()
	}
}

// due is whether returned bytes of credit are to be granted now, with held
// bytes still in the sink. Grants go out in batches of 1/8 of the window,
// which saves a write and a wake-up per packet, or sooner when a sender
// waits: version 1 cannot tell, so it grants as soon as the sink holds
// nothing more of the connection (one grant per frame for a sink that
// releases at once); version 2 grants once the sender has the credit it
// said it waits for (want). Either way a sender blocked on a frame larger
// than the batch's 7/8 of the window gets its credit once the sink
// released enough.
func (tc *tcpConn) due(returned, held int64) bool {
	if returned <= 0 {
		return false // nothing, or still owed for pinned chunks (leave)
	}
	if returned >= tc.batch {
		return true
	}
	if tc.wire == wireV1 {
		return held == 0
	}
	w := tc.wanted.Load()
	return w > 0 && tc.avail.Load()+returned >= w
}

// want records a version 2 sender's "credit wanted" record: it waits for
// credit for a frame of n bytes. Every frame before the record has been
// taken, so avail is what the sender has (grants on their way included).
func (tc *tcpConn) want(n int64) {
	if tc.avail.Load() >= n {
		return // a grant on its way covers it
	}
	tc.wanted.Store(n)
	if tc.due(tc.returned.Load(), tc.held.Load()) {
		tc.signal()
	}
}

func (tc *tcpConn) signal() {
	select {
	case tc.wake <- struct{}{}:
	default:
	}
}

// grants writes credit grants until done is closed; a release that comes
// after the connection closed is simply not granted.
func (tc *tcpConn) grants(done <-chan struct{}, finished chan<- struct{}) {
	defer close(finished)
	var msg [8]byte
	for {
		select {
		case <-done:
			return
		case <-tc.wake:
		}
		if !tc.due(tc.returned.Load(), tc.held.Load()) {
			continue // a chunk's owed credit came back, less than a batch
		}
		n := tc.returned.Swap(0)
		if n <= 0 {
			tc.returned.Add(n) // owed again meanwhile (leave)
			continue
		}
		// Count the credit before the sender can use it.
		avail := tc.avail.Add(n)
		tc.in.outstanding.Add(n)
		if w := tc.wanted.Load(); w > 0 && avail >= w {
			tc.wanted.CompareAndSwap(w, 0)
		}
		binary.LittleEndian.PutUint64(msg[:], uint64(n))
		if _, err := tc.conn.Write(msg[:]); err != nil {
			return
		}
	}
}
