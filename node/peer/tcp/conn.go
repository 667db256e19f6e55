package tcp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-daq/sluice/node/peer"
	"github.com/sluice-daq/sluice/node/peer/internal/handshake"
	"github.com/sluice-daq/sluice/node/peer/internal/link"
	"github.com/sluice-daq/sluice/node/peer/internal/region"
	"github.com/sluice-daq/sluice/node/peer/internal/wire"
)

// maxBatch bounds the data frames one writev carries.
const maxBatch = 64

// Conn is a TCP peer connection: a control and a data connection.
type Conn struct {
	*link.Conn
	t         *Transport
	ctl, data *net.TCPConn
	ctx       context.Context // ends with the Conn: stops pool waits
	cancel    context.CancelFunc

	// Control writer: frames queued by the link, written in batches.
	wmu    sync.Mutex
	frames []byte
	credit uint32
	beat   bool
	flush  bool // with wstop: write what is queued, then close gracefully
	wstop  bool
	wwake  chan struct{}

	// Data writer: sends in order.
	dmu   sync.Mutex
	sends []*send
	dstop bool
	dwake chan struct{}

	poolWait   atomic.Bool   // the data reader waits for room in the pool
	dataDone   chan struct{} // the data reader has exited
	brokenOnce sync.Once
}

var _ peer.Conn = (*Conn)(nil)

type send struct {
	frame   []byte // frame header and data header
	payload []byte
	r       *region.Region
	done    func(error)
}

// startConn makes the Conn and its four goroutines; false if the transport
// closed meanwhile (the sockets are then closed).
func (t *Transport) startConn(p handshake.Peer, ctl, data *net.TCPConn) (*Conn, bool) {
	c := &Conn{t: t, ctl: ctl, data: data, wwake: make(chan struct{}, 1), dwake: make(chan struct{}, 1), dataDone: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.Conn = link.New(p.Link(&t.cfg, &t.ctr, func() { t.reg.Remove(c) }), c)
	if !t.reg.Add(c, func() { t.wg.Add(4) }) {
		ctl.Close()
		data.Close()
		c.cancel()
		return nil, false
	}
	go c.controlWriter()
	go c.controlReader()
	go c.dataWriter()
	go c.dataReader()
	return c, true
}

// Control is link.Wire's: queue a control frame.
func (c *Conn) Control(typ uint16, body []byte) error {
	c.wmu.Lock()
	c.frames = wire.AppendFrame(c.frames, wire.KindControl, typ, body)
	c.wmu.Unlock()
	c.wakeWriter()
	return nil
}

// Credit is link.Wire's.
func (c *Conn) Credit(n uint32) {
	c.wmu.Lock()
	c.credit += n
	c.wmu.Unlock()
	c.wakeWriter()
}

// Frame is link.Wire's.
func (c *Conn) Frame(f []byte) {
	c.wmu.Lock()
	c.frames = append(c.frames, f...)
	c.wmu.Unlock()
	c.wakeWriter()
}

// Heartbeat is link.Wire's.
func (c *Conn) Heartbeat() {
	c.wmu.Lock()
	c.beat = true
	c.wmu.Unlock()
	c.wakeWriter()
}

func (c *Conn) wakeWriter() {
	select {
	case c.wwake <- struct{}{}:
	default:
	}
}

// Shutdown is link.Wire's: once, when the Conn ends.
func (c *Conn) Shutdown(flush bool, err error) {
	c.cancel()
	c.dmu.Lock()
	pending := c.sends
	c.sends, c.dstop = nil, true
	c.dmu.Unlock()
	select {
	case c.dwake <- struct{}{}:
	default:
	}
	for _, s := range pending {
		c.complete(s, err)
	}
	// The data connection goes first: a frame being written is cut (the
	// peer counts it truncated); everything completed before is in the
	// peer's socket ahead of the EOF, and our bye counts it.
	c.data.Close()
	c.wmu.Lock()
	c.flush, c.wstop = flush, true
	c.wmu.Unlock()
	if flush {
		c.ctl.SetWriteDeadline(time.Now().Add(byeGrace))
	} else {
		c.ctl.Close()
	}
	c.wakeWriter()
}

func (c *Conn) complete(s *send, err error) {
	s.r.Done()
	c.SendDone(len(s.payload), err)
	s.done(err)
}

func (c *Conn) lost(what string, err error) {
	reason := peer.LostReset
	if errors.Is(err, peer.ErrProtocol) {
		reason = peer.LostProtocol
	}
	c.Fail(fmt.Errorf("%w: %s: %s: %w", peer.ErrPeerLost, c.Node(), what, err), reason)
}

// dataBroken: the data connection failed. After the peer's bye (whose
// data messages have not all arrived, or the Conn would have ended) that
// is a loss; before it, the control connection decides whether that was a
// goodbye (a bye, counting what was sent) or a loss: if it says nothing
// within byeGrace the Conn is lost.
func (c *Conn) dataBroken(err error) {
	if c.Err() != nil || c.ByeComplete() {
		return
	}
	if bye, sent := c.ByeReceived(); bye {
		c.lost("data connection", fmt.Errorf("said goodbye after %d data messages, %d arrived: %w", sent, c.Received(), err))
		return
	}
	c.brokenOnce.Do(func() {
		time.AfterFunc(byeGrace, func() {
			if bye, sent := c.ByeReceived(); bye {
				err = fmt.Errorf("said goodbye after %d data messages, %d arrived: %w", sent, c.Received(), err)
			}
			c.lost("data connection", err)
		})
	})
}

func (c *Conn) controlWriter() {
	defer c.t.wg.Done()
	var spare []byte
	for {
		<-c.wwake
		c.wmu.Lock()
		buf := c.frames
		c.frames = spare[:0]
		if c.credit > 0 {
			buf = wire.AppendCredit(buf, c.credit)
			c.credit = 0
		}
		if c.beat {
			buf = wire.AppendFrame(buf, wire.KindHeartbeat, 0, nil)
			c.beat = false
		}
		flush, stop := c.flush, c.wstop
		c.wmu.Unlock()
		if stop && !flush {
			return
		}
		if len(buf) > 0 {
			if _, err := c.ctl.Write(buf); err != nil {
				if stop {
					c.ctl.Close()
					return
				}
				if bye, _ := c.ByeReceived(); bye {
					continue // the peer is gone from the control path; its data decides
				}
				c.lost("control connection", err)
				continue // Shutdown sets wstop and wakes us
			}
		}
		if stop {
			// A graceful close: our FIN follows the last frames, and the
			// reader takes what the peer still sends until its FIN (or
			// byeGrace), then closes. Closing with unread bytes would
			// reset the connection, and a reset can throw away frames of
			// ours the peer has not read yet (our bye, or our bye_ack).
			c.ctl.CloseWrite()
			c.ctl.SetReadDeadline(time.Now().Add(byeGrace))
			return
		}
		spare = buf
	}
}

func (c *Conn) controlReader() {
	defer c.t.wg.Done()
	defer c.ctl.Close()
	br := bufio.NewReaderSize(c.ctl, 64<<10)
	var hb [wire.HeaderSize]byte
	var small [wire.MaxHandshake]byte
	for {
		if _, err := io.ReadFull(br, hb[:]); err != nil {
			c.controlBroken(err)
			return
		}
		h, err := wire.ParseHeader(hb[:], c.t.lim)
		if err != nil {
			c.lost("control connection", fmt.Errorf("%w: %w", peer.ErrProtocol, err))
			return
		}
		var body []byte
		if h.Kind == wire.KindControl {
			body = make([]byte, h.Length)
		} else {
			body = small[:h.Length]
		}
		if _, err := io.ReadFull(br, body); err != nil {
			c.controlBroken(err)
			return
		}
		c.Touch()
		if err := c.DeliverFrame(h, body); err != nil {
			c.lost("control connection", err)
			return
		}
	}
}

// controlBroken: the control connection failed or ended. After the peer's
// bye that is no loss by itself: the data it counted may still be on its
// way in the data connection, whose end then decides.
func (c *Conn) controlBroken(err error) {
	if bye, _ := c.ByeReceived(); bye {
		return
	}
	c.lost("control connection", err)
}

func (c *Conn) dataReader() {
	defer c.t.wg.Done()
	defer close(c.dataDone)
	rc, err := c.data.SyscallConn()
	if err != nil {
		c.dataBroken(err)
		return
	}
	// hb holds the current frame's header, the first have bytes of it read
	// already (by the previous frame's readv).
	var hb, next [wire.HeaderSize]byte
	have := 0
	for {
		if have < wire.HeaderSize {
			n, err := io.ReadFull(c.data, hb[have:])
			if err != nil {
				if have+n > 0 {
					c.t.ctr.DataTruncated.Add(1)
				}
				c.dataBroken(err)
				return
			}
		}
		h, err := wire.ParseHeader(hb[:], c.t.lim)
		if err == nil && h.Kind != wire.KindData {
			err = fmt.Errorf("frame kind %d on the data connection", h.Kind)
		}
		if err != nil {
			c.lost("data connection", fmt.Errorf("%w: %w", peer.ErrProtocol, err))
			return
		}
		header := make([]byte, h.Type)
		slot := c.t.pool.TryGet(int(h.Length))
		if slot == nil {
			c.poolWait.Store(true)
			slot, err = c.t.pool.Get(c.ctx, int(h.Length))
			c.poolWait.Store(false)
		}
		if err != nil {
			c.t.ctr.DataTruncated.Add(1)
			return // the Conn or transport ended
		}
		// One readv for the data header, the payload (straight into the
		// slot) and as much of the next frame's header as has arrived.
		have = 0
		if need := len(header) + int(h.Length); need > 0 {
			got, err := readAtLeast(rc, [][]byte{header, slot.Bytes(), next[:]}, need)
			if err != nil {
				slot.Release()
				c.t.ctr.DataTruncated.Add(1)
				c.dataBroken(err)
				return
			}
			have = got - need
		}
		c.Touch()
		c.DeliverData(header, slot)
		hb = next
	}
}

// readAtLeast reads into bufs, in order, until at least min bytes arrived
// (it may fill more of the last buffers), with readv through the poller.
func readAtLeast(rc syscall.RawConn, bufs [][]byte, min int) (int, error) {
	total := 0
	iov := make([][]byte, 0, len(bufs))
	for total < min {
		iov = iov[:0]
		skip := total
		for _, b := range bufs {
			if skip >= len(b) {
				skip -= len(b)
				continue
			}
			iov = append(iov, b[skip:])
			skip = 0
		}
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, rerr = unix.Readv(int(fd), iov)
			return rerr != unix.EAGAIN
		})
		if err == nil {
			err = rerr
		}
		if err != nil {
			return total, err
		}
		if n == 0 {
			return total, io.ErrUnexpectedEOF
		}
		total += n
	}
	return total, nil
}

func (c *Conn) dataWriter() {
	defer c.t.wg.Done()
	batch := make([]*send, 0, maxBatch)
	bufs := make(net.Buffers, 0, 2*maxBatch)
	for {
		c.dmu.Lock()
		for len(c.sends) == 0 && !c.dstop {
			c.dmu.Unlock()
			<-c.dwake
			c.dmu.Lock()
		}
		if c.dstop {
			c.dmu.Unlock()
			return
		}
		n := min(len(c.sends), maxBatch)
		batch = append(batch[:0], c.sends[:n]...)
		c.sends = c.sends[n:]
		c.dmu.Unlock()
		bufs = bufs[:0]
		for _, s := range batch {
			bufs = append(bufs, s.frame)
			if len(s.payload) > 0 {
				bufs = append(bufs, s.payload)
			}
		}
		w := bufs // WriteTo consumes its receiver
		_, err := w.WriteTo(c.data)
		for i := range bufs {
			bufs[i] = nil
		}
		if err != nil {
			if end := c.Err(); end != nil {
				err = end // the Conn ended (Close, loss) and took the connection with it
			} else {
				err = fmt.Errorf("%w: %s: data connection: %w", peer.ErrPeerLost, c.Node(), err)
			}
			for _, s := range batch {
				c.complete(s, err)
			}
			c.dataBroken(err)
			return
		}
		for i, s := range batch {
			c.complete(s, nil)
			batch[i] = nil
		}
	}
}

// SendData queues one data message; see peer.Conn.
func (c *Conn) SendData(ctx context.Context, header []byte, s peer.Slice, done func(error)) error {
	r, err := c.t.regions.StartSend(ctx, c.Conn, header, s)
	if err != nil {
		return err
	}
	frame := make([]byte, wire.HeaderSize+len(header))
	wire.PutHeader(frame, wire.Header{Kind: wire.KindData, Type: uint16(len(header)), Length: uint32(s.N)})
	copy(frame[wire.HeaderSize:], header)
	sd := &send{frame: frame, payload: r.Bytes()[s.Off : s.Off+s.N], r: r, done: done}
	c.dmu.Lock()
	if c.dstop {
		c.dmu.Unlock()
		r.Done()
		c.CancelSend()
		return c.Err()
	}
	c.sends = append(c.sends, sd)
	c.dmu.Unlock()
	select {
	case c.dwake <- struct{}{}:
	default:
	}
	return nil
}
