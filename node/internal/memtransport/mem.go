// Package memtransport is a transport for tests, mem://NAME: packets travel
// from a sender to the input of the same name in the same process through
// a bounded queue. It is what adding a transport takes, and no more: this
// package (its URI, its settings with defaults and Check, its input and
// sender) and one line registering Transport; the tests that use it write
// that line themselves, where a real transport's is in package all.
package memtransport

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/node/transport"
)

// Transport is the registration of mem://NAME.
var Transport = transport.Transport{
	Scheme:          "mem",
	Target:          "NAME",
	About:           "an in-memory queue to the input of the same name in this process (tests)",
	Embeddable:      true,
	NewInputOptions: func() transport.InputOptions { return &Options{Queue: DefaultQueue} },
	OpenInput: func(u transport.URI, o transport.InputOptions) (transport.Input, error) {
		p, err := attach(u.Target, o.(*Options).Queue)
		if err != nil {
			return nil, err
		}
		return &Input{name: u.Target, p: p}, nil
	},
	NewSenderOptions: func() transport.SenderOptions { return &SenderOptions{} },
	OpenSender: func(_ context.Context, u transport.URI, _ transport.SenderOptions, _ int) (transport.Sender, error) {
		p, err := attach(u.Target, DefaultQueue)
		if err != nil {
			return nil, err
		}
		return &Sender{p: p}, nil
	},
}

// DefaultQueue is the default Options.Queue.
const DefaultQueue = 64

// Options are a mem input's settings.
type Options struct {
	// Queue is the packets the queue holds before the sender waits
	// (default 64).
	Queue int `yaml:"queue" doc:"packets the queue holds before the sender waits"`
}

// Check wants a queue of 1 to 65536 packets.
func (o *Options) Check(transport.URI) conf.Problems {
	var ps conf.Problems
	if o.Queue < 1 || o.Queue > 1<<16 {
		ps.Add("queue", o.Queue, "want 1..65536 packets")
	}
	return ps
}

// Ends: the input ends when its sender closes.
func (o *Options) Ends() bool { return true }

// SenderOptions are a mem sender's settings: none.
type SenderOptions struct{}

// Check has nothing to check.
func (*SenderOptions) Check(transport.URI) conf.Problems { return nil }

// pipe is the queue between the sender and the input of one name.
type pipe struct {
	q       chan []byte
	ended   chan struct{} // closed by the sender's Close
	drained chan struct{} // closed by the input once it read everything
	drain   sync.Once
}

var (
	mu    sync.Mutex
	pipes = map[string]*pipe{}
)

// attach returns the pipe of name, made with a queue of size if it is new
// (the input's size when the input opens first, as in a node).
func attach(name string, size int) (*pipe, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: mem:// needs a name", transport.ErrBadURI)
	}
	mu.Lock()
	defer mu.Unlock()
	p := pipes[name]
	if p == nil {
		p = &pipe{q: make(chan []byte, size), ended: make(chan struct{}), drained: make(chan struct{})}
		pipes[name] = p
	}
	return p, nil
}

// Input hands on what the sender of its name sends.
type Input struct {
	name string
	p    *pipe
	c    transport.Counters
}

// Run hands every packet to sink until the sender closed and the queue is
// empty, or ctx ends.
func (in *Input) Run(ctx context.Context, sink transport.Sink) error {
	for {
		var b []byte
		select {
		case <-ctx.Done():
			return nil
		case b = <-in.p.q:
		case <-in.p.ended:
			select {
			case b = <-in.p.q:
			default:
				in.p.drain.Do(func() { close(in.p.drained) })
				in.c.StreamEnded()
				return nil
			}
		}
		n := int64(len(b))
		in.c.Hold(n)
		if err := in.c.Deliver(ctx, sink, b, func() { in.c.Hold(-n) }); err != nil {
			return err
		}
	}
}

// Stats returns the counters.
func (in *Input) Stats() transport.Stats { return in.c.Snapshot() }

// Close forgets the pipe, so that the name can be used again.
func (in *Input) Close() error {
	mu.Lock()
	defer mu.Unlock()
	if pipes[in.name] == in.p {
		delete(pipes, in.name)
	}
	return nil
}

// Sender queues packets for the input of its name.
type Sender struct {
	p        *pipe
	throttle time.Duration
}

// Send queues a copy of p, waiting while the queue is full.
func (s *Sender) Send(ctx context.Context, p transport.Packet) error {
	return s.put(ctx, append([]byte(nil), p.Bytes...))
}

// SendTruncated queues the first cut bytes of p: the input counts them
// truncated.
func (s *Sender) SendTruncated(ctx context.Context, p transport.Packet, cut int) error {
	return s.put(ctx, append([]byte(nil), p.Bytes[:cut]...))
}

func (s *Sender) put(ctx context.Context, b []byte) error {
	select {
	case s.p.q <- b:
		return nil
	default:
	}
	t0 := time.Now()
	defer func() { s.throttle += time.Since(t0) }()
	select {
	case s.p.q <- b:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Flush does nothing: a queued packet is visible at once.
func (s *Sender) Flush() error { return nil }

// Close ends the stream and waits until the input read everything.
func (s *Sender) Close(ctx context.Context, _ uint64) error {
	close(s.p.ended)
	select {
	case <-s.p.drained:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stats is the time Send waited for room in the queue.
func (s *Sender) Stats() transport.SenderStats {
	return transport.SenderStats{ThrottleNs: uint64(s.throttle)}
}
