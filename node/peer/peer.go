package peer

import (
	"context"
	"time"
)

// Transport is one process's endpoint on the peer network: it listens at
// Addr, connects to other nodes, and owns the memory data is sent from
// (Regions) and received into (the receive pool). Make one per process with
// Open (or a transport package's New); all methods are safe for concurrent
// use.
type Transport interface {
	// Name is the transport's registered name ("tcp", "ucx").
	Name() string
	// Addr is the address the transport listens at, "host:port", with the
	// port the system picked when Config.Listen asked for port 0. Peers
	// pass it to Connect.
	Addr() string
	// Connect dials the node listening at addr ("host:port") and runs the
	// hello exchange. It returns the new Conn, or an error: ErrRefused
	// (wrapped, saying why: another farm, a wrong token, another protocol
	// version, our own node id), ErrClosed, ctx's error, or the network's.
	// Two nodes need one Conn between them (it is full duplex); which side
	// dials is the caller's convention.
	Connect(ctx context.Context, addr string) (Conn, error)
	// Accept returns the next peer that connected to us and passed the
	// hello, in arrival order. Conns not yet accepted wait in a queue of
	// Config.AcceptQueue; beyond it new peers are refused and counted
	// (Stats.Refused["accept_queue"]). Errors: ErrClosed, ctx's error.
	Accept(ctx context.Context) (Conn, error)
	// Register makes mem (mmap'd or C memory, e.g. the readout ring's data
	// region; never Go heap memory: UCX keeps the address until a send
	// completes) a Region that SendData can send from without copying. mem
	// must stay mapped until the Region is closed.
	Register(mem []byte) (Region, error)
	// AllocRegion returns n bytes of transport-owned registered memory
	// (page-aligned, mmap'd), for senders that have no ring of their own.
	AllocRegion(n int) (Region, error)
	// Stats is a snapshot of the transport's counters.
	Stats() Stats
	// Close closes every Conn (in-flight sends complete with ErrClosed,
	// queued received messages are released), stops listening and frees
	// the receive pool and the transport's own goroutines. Regions the
	// caller registered must be closed by the caller first; Close reports
	// those still open as ErrRegionOpen (and closes them). Buffers the
	// caller still holds stay readable until released: the pool is unmapped
	// only when the last one is. Idempotent.
	Close() error
}

// Conn is an established connection to one peer node, full duplex. All
// methods are safe for concurrent use.
//
// Control messages (SendControl) are small, typed and delivered in order;
// they travel apart from data so that a large data message never delays
// them (TCP: their own connection; UCX: eager active messages). Data
// messages (SendData) are a small header plus a payload sent straight from a
// registered Region and received into a slot of the receiving transport's
// bounded receive pool; they are delivered in the order sent, relative to
// each other only (a control message sent after a data message may be
// delivered before it).
type Conn interface {
	// Node is the peer's node id, as its hello said.
	Node() string
	// RemoteAddr is the peer's listen address as its hello said (what
	// Connect would dial), or "" if it gave none.
	RemoteAddr() string
	// SendControl sends one control message of type typ with body (at most
	// MaxControl bytes; body is copied before it returns). It blocks while
	// the peer has ControlWindow messages of ours not yet taken by its
	// Recv (flow control), until ctx ends or the Conn fails. Errors:
	// ErrTooLarge, ErrClosed, ErrPeerClosed, ErrPeerLost (wrapped), ctx's.
	SendControl(ctx context.Context, typ uint16, body []byte) error
	// SendData sends one data message: header (at most MaxHeader bytes,
	// copied) and the payload s, which is sent from where it is, without a
	// copy by sluice. The caller must not modify s's bytes until done runs;
	// done runs exactly once, on a transport goroutine or in the Close that
	// ended the Conn (it must not block),
	// with nil once the bytes were handed over and may be reused, or with
	// the error that ended the send (ErrPeerLost, ErrClosed...). SendData
	// blocks while SendQueue data messages of this Conn are in flight
	// (backpressure: a receiver whose pool is full stops taking them). If
	// SendData returns an error, done is not called. Errors: ErrTooLarge
	// (payload above the peer's MaxData), ErrNotRegistered (s is not inside
	// a live Region of this transport), the Conn's error, ctx's.
	SendData(ctx context.Context, header []byte, s Slice, done func(error)) error
	// Recv returns the next received message (control or data) of this
	// peer. After the peer closed or was lost, Recv still returns the
	// messages already complete, then the Conn's error. Errors: ErrClosed
	// (we closed), ErrPeerClosed, ErrPeerLost (wrapped: reset, heartbeat
	// timeout, endpoint error), ctx's.
	Recv(ctx context.Context) (Message, error)
	// Done is closed when the Conn ends (either side closed it, or the peer
	// was lost); Err then says why.
	Done() <-chan struct{}
	// Err is nil while the Conn is up, then ErrClosed, ErrPeerClosed or a
	// wrapped ErrPeerLost.
	Err() error
	// Finish is the goodbye of a sender that must know its data arrived:
	// it refuses further SendData, waits until the data messages in
	// flight completed, says goodbye (a bye counting the data messages
	// sent) and waits until the peer answers that it received them all
	// (it answers once they are all in its receive pool), then closes
	// the Conn. While it waits the Conn is alive: heartbeats flow both
	// ways and a peer that dies or falls silent ends the wait. nil means
	// the peer confirmed every data message this Conn sent. Errors: the
	// Conn's end before the peer confirmed (ErrPeerLost wrapped, or
	// ErrPeerClosed if the peer closed first), ctx's (the Conn is then
	// closed as by Close). The peer sees ErrPeerClosed after its Recv
	// returned every message.
	Finish(ctx context.Context) error
	// Close says goodbye to the peer without waiting for its answer and
	// ends the Conn: in-flight sends complete with ErrClosed, received
	// messages not yet returned by Recv are released. The bye counts the
	// data messages that completed: the peer sees ErrPeerClosed once they
	// all arrived, and a loss (ErrPeerLost) if its connection ends before.
	// Idempotent.
	Close() error
}

// Kind says what a Message carries.
type Kind uint8

const (
	// KindControl: a control message; Type and Body are set.
	KindControl Kind = 1
	// KindData: a data message; Header and Data are set.
	KindData Kind = 2
)

func (k Kind) String() string {
	switch k {
	case KindControl:
		return "control"
	case KindData:
		return "data"
	}
	return "kind?"
}

// Message is one received message.
type Message struct {
	Kind Kind
	// Type is a control message's type (the sender's typ).
	Type uint16
	// Body is a control message's bytes; the receiver owns them.
	Body []byte
	// Header is a data message's header bytes; the receiver owns them.
	Header []byte
	// Data is a data message's payload in a receive-pool slot: the
	// receiver must call Data.Release exactly once.
	Data Buffer
}

// Region is registered memory data can be sent from (Transport.Register,
// Transport.AllocRegion).
type Region interface {
	// Bytes is the whole region.
	Bytes() []byte
	// Slice is the part [off, off+n) of the region; it panics if that is
	// outside the region.
	Slice(off, n int) Slice
	// Close deregisters the region (and unmaps it if the transport
	// allocated it). Sends from it must have completed; Close returns
	// ErrRegionBusy while some are in flight. Idempotent once it succeeded.
	Close() error
}

// Slice is a part of a Region: what SendData sends.
type Slice struct {
	Region Region
	Off, N int
}

// Bytes are the slice's bytes (inside the Region's memory).
func (s Slice) Bytes() []byte { return s.Region.Bytes()[s.Off : s.Off+s.N] }

// Limits of the messages.
const (
	// MaxControl is the largest control message body.
	MaxControl = 64 << 10
	// MaxHeader is the largest data message header.
	MaxHeader = 4 << 10
	// DefaultMaxData is Config.MaxData's default: the largest data payload.
	DefaultMaxData = 64 << 20
)

// Config configures a Transport. Every transport takes the same fields and
// ignores none without saying so in its docs.
type Config struct {
	// Node is this node's id (required, 1..255 bytes): peers see it as
	// Conn.Node.
	Node string
	// Farm is the farm's id (up to 255 bytes): a peer of another farm is
	// refused (Stats.Refused["farm"]).
	Farm string
	// Token is the farm's shared secret: the hello proves that both sides
	// know it (HMAC-SHA256 over fresh nonces; the token itself never
	// travels). A peer that does not is refused (Stats.Refused["token"]).
	Token string
	// Listen is the address to listen at, "host:port"; port 0 picks one
	// (see Transport.Addr). Required.
	Listen string
	// Advertise is the address peers should dial for us, given to them in
	// the hello (Conn.RemoteAddr); default Addr().
	Advertise string
	// PoolBytes is the receive pool: registered memory that data messages
	// are received into, part of the node's memory budget. Messages wait
	// (their senders throttled) while it has no room. Default 256 MiB;
	// at least MaxData.
	PoolBytes int64
	// MaxData is the largest data payload this node accepts (default
	// DefaultMaxData). Told to peers in the hello; their SendData refuses
	// larger payloads with ErrTooLarge.
	MaxData int
	// SendQueue is how many data messages per Conn may be in flight
	// (sent, not yet completed) before SendData blocks. Default 64.
	SendQueue int
	// ControlWindow is how many control messages per Conn the peer may
	// have sent and we not yet taken by Recv: the flow control of control
	// messages. Default 256.
	ControlWindow int
	// AcceptQueue is how many connected peers may wait for Accept.
	// Default 1024.
	AcceptQueue int
	// Heartbeat is how often a Conn that sent nothing else sends a
	// heartbeat (default 100ms).
	Heartbeat time.Duration
	// PeerTimeout: a peer from which nothing arrived for this long is lost
	// (ErrPeerLost, ErrHeartbeat), e.g. a stopped process. Default
	// 5 × Heartbeat. A process that dies is seen sooner: its connection
	// resets (TCP) or its endpoint fails (UCX).
	PeerTimeout time.Duration
	// HandshakeTimeout bounds the hello exchange (default 5s).
	HandshakeTimeout time.Duration
	// BusyPoll makes UCX poll its worker instead of sleeping on its event
	// fd between events (wake-up mode, the default, costs a little latency
	// but no idle core). TCP ignores it.
	BusyPoll bool
}
