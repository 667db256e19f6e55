// Package peerinput is the node's peer input, peer://HOST:PORT: multi-
// fragment packets (MFPs) from other processes over a peer transport
// (package peer: "tcp", pure Go, or "ucx", UCX when built with the ucx
// tag), one MFP per data message, received into the transport's registered
// receive pool and handed to the builder where they landed: the builder
// releases the pool slot when it is done with the packet, and a full pool
// throttles the senders. It also holds the sending end, for `sluice
// readout --to peer://...` and the embedded emulator.
//
// It sits between node/transport (whose registry it joins, see package
// all) and node/peer, which know nothing of each other.
package peerinput

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/node/peer"
	_ "github.com/sluice-daq/sluice/node/peer/tcp" // registers "tcp"
	_ "github.com/sluice-daq/sluice/node/peer/ucx" // registers "ucx" when built with the ucx tag
	"github.com/sluice-daq/sluice/node/transport"
)

// Transport registers peer://HOST:PORT[?transport=tcp|ucx] (see package
// all). Without the option the transport is tcp, as farm.transport's
// default: one default whether or not the binary has UCX.
var Transport = transport.Transport{
	Scheme:          "peer",
	Target:          "HOST:PORT",
	Query:           []string{"transport"},
	About:           about(),
	CheckTarget:     checkTarget,
	Embeddable:      true,
	NewInputOptions: func() transport.InputOptions { o := DefaultOptions(); return &o },
	OpenInput: func(u transport.URI, o transport.InputOptions) (transport.Input, error) {
		return Listen(u, *o.(*Options))
	},
	NewSenderOptions: func() transport.SenderOptions { o := DefaultSenderOptions(); return &o },
	OpenSender: func(ctx context.Context, u transport.URI, o transport.SenderOptions, _ int) (transport.Sender, error) {
		return Dial(ctx, u, *o.(*SenderOptions))
	},
}

// about describes the input and its ?transport= option, naming the
// transports this binary has (they registered before this package's
// variables are initialized: it imports them).
func about() string {
	s := "MFPs from peer processes over a peer transport (?transport=tcp|ucx; default " + defaultKind() + ", this binary has " + strings.Join(peer.Names(), ", ")
	if peer.Missing("ucx") != nil {
		s += "; ucx needs a binary built with the ucx tag"
	}
	return s + ")"
}

// defaultKind is tcp, in every binary (farm.transport's default too).
func defaultKind() string { return "tcp" }

// Kind is the peer transport u asks for.
func Kind(u transport.URI) string {
	if k := u.Option("transport"); k != "" {
		return k
	}
	return defaultKind()
}

func checkTarget(u transport.URI) error {
	if err := transport.CheckHostPort(u); err != nil {
		return err
	}
	if err := peer.Missing(Kind(u)); err != nil {
		return fmt.Errorf("transport=%s: %w", Kind(u), err)
	}
	return nil
}

// Defaults of Options and SenderOptions.
const (
	DefaultPool      = 64 << 20 // within the default budget's inputs share (15 % of 512 MiB)
	DefaultMaxPacket = 64 << 20
	DefaultSendRing  = 64 << 20
)

// Options are a peer input's settings.
type Options struct {
	// Node is this node's id on the peer network (default "bu").
	Node string `yaml:"node" doc:"this node's id on the peer network"`
	// Farm and Token: peers of another farm, or that cannot prove the
	// token, are refused (and counted by the peer transport).
	Farm  string `yaml:"farm" doc:"peers of another farm are refused"`
	Token string `yaml:"token" doc:"the farm's shared secret (proved by HMAC, never sent)"`
	// Pool is the receive pool, registered memory the packets land in:
	// part of the node's memory budget, its inputs share (default 64 MiB).
	Pool conf.ByteSize `yaml:"pool" doc:"receive pool the packets land in (part of the memory budget)"`
	// MaxPacket is the largest packet taken (default 64 MiB).
	MaxPacket conf.ByteSize `yaml:"max_packet" doc:"largest packet taken"`
	// ExpectStreams: when > 0, Run returns once this many senders said
	// goodbye (0: it runs until it is stopped).
	ExpectStreams int `yaml:"expect_streams" doc:"end the input after this many senders said goodbye (0 = never)"`
	// PeerTimeout: a sender silent this long (no heartbeat) is lost; 0:
	// the transport's default, 5 heartbeats of 100ms. A machine whose
	// processes can be starved for longer (many busy processes on few
	// cores) wants more.
	PeerTimeout time.Duration `yaml:"peer_timeout" doc:"a sender silent this long is lost (0 = 500ms, 5 heartbeats)"`
}

// DefaultOptions are the settings of an input configured with none.
func DefaultOptions() Options {
	return Options{Node: "bu", Pool: DefaultPool, MaxPacket: DefaultMaxPacket}
}

// Check wants a node id, a pool of 1 MiB to 64 GiB holding the largest
// packet, and a number of streams >= 0.
func (o *Options) Check(transport.URI) conf.Problems {
	var ps conf.Problems
	if l := len(o.Node); l == 0 || l > 255 {
		ps.Add("node", o.Node, "want a node id of 1..255 bytes")
	}
	if len(o.Farm) > 255 {
		ps.Add("farm", o.Farm, "want at most 255 bytes")
	}
	if o.MaxPacket < 1 || o.MaxPacket > 1<<31 {
		ps.Add("max_packet", o.MaxPacket, "want 1B..2GiB")
	}
	if o.Pool < 1<<20 || o.Pool > 64<<30 || o.Pool < o.MaxPacket {
		ps.Add("pool", o.Pool, "want 1MiB..64GiB and at least max_packet")
	}
	if o.ExpectStreams < 0 {
		ps.Add("expect_streams", o.ExpectStreams, "want 0, or a number of senders")
	}
	checkPeerTimeout(&ps, o.PeerTimeout)
	return ps
}

// checkPeerTimeout wants 0 (the default) or more than a heartbeat
// (peer.DefaultHeartbeat), at most an hour.
func checkPeerTimeout(ps *conf.Problems, d time.Duration) {
	if d != 0 && (d <= peer.DefaultHeartbeat || d > time.Hour) {
		ps.Add("peer_timeout", d, "want 0 (500ms) or more than a heartbeat (%v), at most 1h", peer.DefaultHeartbeat)
	}
}

// MemoryBytes is the receive pool: the node's memory budget counts it in
// its inputs part.
func (o *Options) MemoryBytes() int64 { return int64(o.Pool) }

// SharedMemory: the pool is mmap'd, outside the Go heap.
func (*Options) SharedMemory() bool { return true }

// Ends: the input ends once the expected senders said goodbye, if it was
// told how many there are.
func (o *Options) Ends() bool { return o.ExpectStreams > 0 }

// Input receives packets from peers.
type Input struct {
	tr    peer.Transport
	o     Options
	c     transport.Counters
	log   *slog.Logger
	close sync.Once
}

// SetLogger is transport.Logged's: the node's logger (rate-limited) for
// lost senders.
func (in *Input) SetLogger(l *slog.Logger) { in.log = l }

// Listen starts the peer transport of u listening at u's HOST:PORT.
func Listen(u transport.URI, o Options) (*Input, error) {
	tr, err := peer.Open(Kind(u), peer.Config{
		Node: o.Node, Farm: o.Farm, Token: o.Token, Listen: u.Target,
		PoolBytes: int64(o.Pool), MaxData: int(o.MaxPacket), PeerTimeout: o.PeerTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	return &Input{tr: tr, o: o, log: slog.New(slog.DiscardHandler)}, nil
}

// Addr is the address the input listens at.
func (in *Input) Addr() string { return in.tr.Addr() }

// ListenAddr is Addr (transport.Listener: the node logs it and shows it in
// /status, which tells the port chosen for peer://HOST:0).
func (in *Input) ListenAddr() string { return in.tr.Addr() }

// Peer is the peer transport (its Stats: refusals, losses, pool).
func (in *Input) Peer() peer.Transport { return in.tr }

// Stats are the input's counters; packets cut off by a lost peer count as
// truncated_at_disconnect, and peers whose hello failed (another farm, a
// wrong token, ...) as Refused, by the peer transport's reasons.
func (in *Input) Stats() transport.Stats {
	s := in.c.Snapshot()
	ps := in.tr.Stats()
	if n := ps.DataTruncated; n > 0 {
		s.Discarded[transport.TruncatedAtDisconnect] += n
	}
	if len(ps.Refused) > 0 {
		s.Refused = maps.Clone(ps.Refused)
	}
	s.ExpectStreams = in.o.ExpectStreams
	return s
}

// Close stops the transport (Run does it when it returns). Idempotent.
func (in *Input) Close() error {
	var err error
	in.close.Do(func() { err = in.tr.Close() })
	return err
}

// Run accepts peers and hands their packets to sink until ctx ends, the
// expected senders said goodbye (nil) or the sink fails (its error).
func (in *Input) Run(ctx context.Context, sink transport.Sink) error {
	defer in.Close()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	defer wg.Wait()
	var mu sync.Mutex
	ended := 0
	for {
		c, err := in.tr.Accept(ctx)
		if err != nil {
			break
		}
		in.c.Connected()
		in.c.Opened(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer in.c.Opened(-1)
			defer c.Close()
			clean, err := in.serve(ctx, c, sink)
			if err != nil {
				cancel(err)
				return
			}
			if clean {
				in.c.StreamEnded()
				mu.Lock()
				ended++
				done := in.o.ExpectStreams > 0 && ended == in.o.ExpectStreams
				mu.Unlock()
				if done {
					cancel(nil)
				}
			}
		}()
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// serve hands one peer's packets on until it leaves: clean when it said
// goodbye and everything it counted arrived; an error only from the sink.
// A sender lost otherwise is counted (StreamsLost, by reason) and logged.
func (in *Input) serve(ctx context.Context, c peer.Conn, sink transport.Sink) (clean bool, err error) {
	packets := 0
	for {
		m, err := c.Recv(ctx)
		if err != nil {
			if errors.Is(err, peer.ErrPeerLost) {
				reason := lostReason(err)
				in.c.StreamLost(reason)
				in.log.Warn("peer sender lost", "peer", c.Node(), "addr", c.RemoteAddr(), "reason", reason,
					"packets", packets, "err", err)
			}
			return errors.Is(err, peer.ErrPeerClosed), nil
		}
		packets++
		if m.Kind != peer.KindData {
			in.c.Discard(transport.Protocol) // a peer input takes data messages only
			continue
		}
		b := m.Data
		n := int64(len(b.Bytes()))
		in.c.Hold(n)
		release := func() {
			in.c.Hold(-n)
			b.Release()
		}
		if err := in.c.Deliver(ctx, sink, b.Bytes(), release); err != nil {
			return false, err
		}
	}
}

// lostReason is the peer.Lost* name of a loss (the StreamsLost key).
func lostReason(err error) string {
	switch {
	case errors.Is(err, peer.ErrHeartbeat):
		return peer.LostHeartbeat
	case errors.Is(err, peer.ErrProtocol):
		return peer.LostProtocol
	}
	return peer.LostReset
}

// SenderOptions are a peer sender's settings.
type SenderOptions struct {
	// Node is the sender's node id (default "ru").
	Node  string `yaml:"node" doc:"the sender's node id"`
	Farm  string `yaml:"farm" doc:"as the input's"`
	Token string `yaml:"token" doc:"as the input's"`
	// SendRing is the registered memory packets are copied into to be sent
	// from (default 64 MiB): the emulator makes its packets in Go memory,
	// where a readout unit would send from its registered readout ring.
	SendRing conf.ByteSize `yaml:"send_ring" doc:"registered memory the packets are sent from"`
	// ConnectWait is how long to keep retrying while nothing listens at the
	// address yet (a readout unit started before its builder); 0: fail at
	// once with the refusal.
	ConnectWait time.Duration `yaml:"connect_wait" doc:"keep retrying this long while nothing listens yet (0 = fail at once)"`
	// PeerTimeout is the input's, for the receiver as seen by the sender.
	PeerTimeout time.Duration `yaml:"peer_timeout" doc:"the receiver silent this long is lost (0 = 500ms, 5 heartbeats)"`
}

// MemoryBytes is the send ring and the sender transport's own receive
// pool (1 MiB): what an embedded emulator sending to a peer input holds.
func (o *SenderOptions) MemoryBytes() int64 { return int64(o.SendRing) + senderPool }

// SharedMemory: both are mmap'd, outside the Go heap.
func (*SenderOptions) SharedMemory() bool { return true }

// senderPool is the receive pool of a sender's own transport: it receives
// control messages only.
const senderPool = 1 << 20

// DefaultSenderOptions are the settings of a sender configured with none.
func DefaultSenderOptions() SenderOptions {
	return SenderOptions{Node: "ru", SendRing: DefaultSendRing}
}

// Check wants a node id, a send ring of 64 KiB..16 GiB, a port to send to.
func (o *SenderOptions) Check(u transport.URI) conf.Problems {
	var ps conf.Problems
	if want := transport.SendPortWant(u); want != "" {
		ps.Add("", nil, "%s", want)
	}
	if l := len(o.Node); l == 0 || l > 255 {
		ps.Add("node", o.Node, "want a node id of 1..255 bytes")
	}
	if o.SendRing < 64<<10 || o.SendRing > 16<<30 {
		ps.Add("send_ring", o.SendRing, "want 64KiB..16GiB")
	}
	if o.ConnectWait < 0 || o.ConnectWait > time.Hour {
		ps.Add("connect_wait", o.ConnectWait, "want 0..1h, such as 10s")
	}
	checkPeerTimeout(&ps, o.PeerTimeout)
	return ps
}

// Sender sends packets to a peer input: each is copied into the send ring
// (registered once) and sent from there as one data message.
type Sender struct {
	tr       peer.Transport
	c        peer.Conn
	ring     *ring
	throttle time.Duration
}

// Dial connects to the peer input at u. Nothing listening there fails at
// once (peer.ErrUnreachable, naming the address) unless o.ConnectWait says
// to keep retrying; a refusal by the peer (peer.ErrRefused) always does.
func Dial(ctx context.Context, u transport.URI, o SenderOptions) (*Sender, error) {
	if err := transport.CheckSendPort(u); err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(u.Target)
	listen := ":0"
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" {
		listen = "127.0.0.1:0"
	}
	tr, err := peer.Open(Kind(u), peer.Config{Node: o.Node, Farm: o.Farm, Token: o.Token, Listen: listen, PoolBytes: senderPool, MaxData: 1 << 20,
		PeerTimeout: o.PeerTimeout})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	// The receiver may not listen yet (a readout unit may start before its
	// builder): retry for ConnectWait, never after a refusal by the peer.
	deadline := time.Now().Add(o.ConnectWait)
	var c peer.Conn
	for {
		c, err = tr.Connect(ctx, u.Target)
		if err == nil {
			break
		}
		if errors.Is(err, peer.ErrRefused) || ctx.Err() != nil || !time.Now().Before(deadline) {
			tr.Close()
			if errors.Is(err, peer.ErrUnreachable) && o.ConnectWait > 0 {
				return nil, fmt.Errorf("%s: %w (retried for connect_wait %v)", u, err, o.ConnectWait)
			}
			return nil, fmt.Errorf("%s: %w", u, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r, err := tr.AllocRegion(int(o.SendRing))
	if err != nil {
		tr.Close()
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	return &Sender{tr: tr, c: c, ring: newRing(r)}, nil
}

// Send copies p into the ring (waiting for room: counted as throttling)
// and sends it.
func (s *Sender) Send(ctx context.Context, p transport.Packet) error { return s.send(ctx, p.Bytes) }

// SendTruncated sends only the first cut bytes of p as a whole message: the
// input counts it as truncated, like a packet cut by a board's reset.
func (s *Sender) SendTruncated(ctx context.Context, p transport.Packet, cut int) error {
	return s.send(ctx, p.Bytes[:min(cut, len(p.Bytes))])
}

func (s *Sender) send(ctx context.Context, b []byte) error {
	t0 := time.Now()
	off, err := s.ring.alloc(ctx, len(b))
	if err != nil {
		return err
	}
	copy(s.ring.r.Bytes()[off:], b)
	err = s.c.SendData(ctx, nil, s.ring.r.Slice(off, len(b)), func(err error) { s.ring.free(off, err) })
	s.throttle += time.Since(t0)
	if err != nil {
		s.ring.free(off, err)
		if errors.Is(err, peer.ErrTooLarge) {
			return fmt.Errorf("%w: %v", transport.ErrPacketTooLarge, err)
		}
		return err
	}
	return nil
}

// Flush has nothing to do: every packet is on its way once Send returned.
func (s *Sender) Flush() error { return nil }

// Close waits until every packet was handed over, says goodbye and waits
// until the input confirms it received every packet sent (peer.Conn's
// Finish), then stops the transport. An error means some packets may not
// have arrived: the receiver was lost (or ctx ended) before it confirmed.
func (s *Sender) Close(ctx context.Context, _ uint64) error {
	err := s.ring.drain(ctx)
	if err == nil {
		err = s.c.Finish(ctx)
	}
	if e := s.c.Close(); err == nil {
		err = e
	}
	if e := s.tr.Close(); err == nil {
		err = e
	}
	return err
}

// Stats: the time Send waited for ring room or a send slot.
func (s *Sender) Stats() transport.SenderStats {
	return transport.SenderStats{ThrottleNs: uint64(s.throttle)}
}
