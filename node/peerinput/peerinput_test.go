package peerinput_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/sluice-daq/sluice/node/peer"
	"github.com/sluice-daq/sluice/node/peerinput"
	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/schemas"
)

// sink records packets, checks they lie in the input's receive pool, and
// releases them (some late, out of order).
type sink struct {
	t    *testing.T
	pool []byte
	mu   sync.Mutex
	got  map[uint64]int // first event id -> fragments
	held []func()
}

func (s *sink) AddPacket(_ context.Context, p schemas.MFP, release func()) error {
	b := p.Bytes()
	base, at := uintptr(unsafe.Pointer(&s.pool[0])), uintptr(unsafe.Pointer(&b[0]))
	if at < base || at+uintptr(len(b)) > base+uintptr(len(s.pool)) {
		s.t.Errorf("packet at %#x outside the receive pool [%#x, +%d): copied", at, base, len(s.pool))
	}
	var first uint64
	p.Fragments(func(i int, id uint64, _ uint32, _ []byte) bool {
		if i == 0 {
			first = id
		}
		return true
	})
	s.mu.Lock()
	s.got[first] = int(p.N)
	s.held = append(s.held, release)
	if len(s.held) == 4 {
		for i := len(s.held) - 1; i >= 0; i-- {
			s.held[i]()
		}
		s.held = s.held[:0]
	}
	s.mu.Unlock()
	return nil
}

func (s *sink) releaseAll() {
	s.mu.Lock()
	for _, r := range s.held {
		r()
	}
	s.held = nil
	s.mu.Unlock()
}

func packet(first uint64, n, size int) []byte {
	payloads := make([][]byte, n)
	for i := range payloads {
		payloads[i] = make([]byte, size)
		for j := range payloads[i] {
			payloads[i][j] = byte(first) + byte(j)
		}
	}
	return schemas.AppendMFP(nil, 3, first, 0, 3, payloads, nil)
}

// TestSendReceive: two senders (one truncating a packet) to one input over
// each peer transport this binary has; the input ends once both said
// goodbye, every packet delivered in place, the cut one counted.
func TestSendReceive(t *testing.T) {
	for _, kind := range peer.Names() {
		t.Run(kind, func(t *testing.T) {
			if kind == "ucx" {
				t.Setenv("UCX_TLS", "tcp")
				t.Setenv("UCX_NET_DEVICES", "lo")
			}
			u, err := transport.ParseURI("peer://127.0.0.1:0?transport=" + kind)
			if err != nil {
				t.Fatal(err)
			}
			o := peerinput.DefaultOptions()
			o.Farm, o.Token, o.ExpectStreams, o.Pool, o.MaxPacket = "f", "secret", 2, 8<<20, 1<<20
			in, err := peerinput.Listen(u, o)
			if err != nil {
				t.Fatal(err)
			}
			pm := in.Peer().(interface{ PoolMemory() []byte }).PoolMemory()
			s := &sink{t: t, pool: pm, got: map[uint64]int{}}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- in.Run(ctx, s) }()
			to, _ := transport.ParseURI(fmt.Sprintf("peer://%s?transport=%s", in.Addr(), kind))
			var wg sync.WaitGroup
			for k := 0; k < 2; k++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					so := peerinput.DefaultSenderOptions()
					so.Node, so.Farm, so.Token, so.SendRing = fmt.Sprintf("ru%d", k), "f", "secret", 1<<20
					snd, err := peerinput.Dial(ctx, to, so)
					if err != nil {
						t.Error(err)
						return
					}
					for i := 0; i < 300; i++ {
						first := uint64(k*1000 + i*2)
						p := transport.Packet{Bytes: packet(first, 2, 100+i*37)}
						if k == 1 && i == 7 {
							err = snd.SendTruncated(ctx, p, 50)
						} else {
							err = snd.Send(ctx, p)
						}
						if err != nil {
							t.Error(err)
							return
						}
					}
					if err := snd.Close(ctx, 300); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			// Run ends by itself: both streams ended.
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("Run did not end after both senders said goodbye")
			}
			s.releaseAll()
			st := in.Stats()
			if len(s.got) != 599 || st.Packets != 599 || st.Streams != 2 || st.Discarded[transport.Truncated] != 1 || st.HeldBytes != 0 {
				t.Fatalf("got %d packets; stats %+v", len(s.got), st)
			}
			if ps := in.Peer().Stats(); ps.CopiedBytes != 0 || ps.PoolHeld != 0 {
				t.Fatalf("peer stats: copied %d, pool held %d", ps.CopiedBytes, ps.PoolHeld)
			}
		})
	}
}

// TestChecks: option and URI mistakes are named.
func TestChecks(t *testing.T) {
	u, _ := transport.ParseURI("peer://127.0.0.1:0")
	o := peerinput.Options{Node: "", Pool: 1 << 10, MaxPacket: 1 << 20, ExpectStreams: -1}
	if ps := o.Check(u); len(ps) != 3 {
		t.Fatalf("problems %v", ps)
	}
	so := peerinput.DefaultSenderOptions()
	if ps := so.Check(u); len(ps) != 1 {
		t.Fatalf("sender to port 0: %v", ps)
	}
	// peer_timeout: 0 (the transport's default) or more than a heartbeat.
	for d, bad := range map[time.Duration]bool{0: false, 50 * time.Millisecond: true, 100 * time.Millisecond: true, 10 * time.Second: false, 2 * time.Hour: true} {
		o := peerinput.DefaultOptions()
		o.PeerTimeout = d
		if ps := o.Check(u); (len(ps) == 1 && ps[0].Path == "peer_timeout") != bad || len(ps) > 1 {
			t.Errorf("peer_timeout %v: problems %v", d, ps)
		}
	}
	if _, err := transport.ParseURI("peer://127.0.0.1:1?transport=carrier-pigeon"); err == nil {
		t.Fatal("unknown peer transport accepted")
	}
	bad := transport.URI{Scheme: "peer", Target: "127.0.0.1:1", Query: url.Values{"transport": {"carrier-pigeon"}}}
	if _, err := peerinput.Dial(context.Background(), bad, so); !errors.Is(err, peer.ErrUnknownTransport) {
		t.Fatalf("dial with an unknown transport: %v", err)
	}
}

// A sender with a wrong token or of another farm is refused, and the input
// counts it (connections_refused in /status and the metrics; it once
// stayed at 0 while the transport counted).
func TestInputCountsRefusedPeers(t *testing.T) {
	u, _ := transport.ParseURI("peer://127.0.0.1:0?transport=tcp")
	o := peerinput.DefaultOptions()
	o.Farm, o.Token, o.Pool, o.MaxPacket = "f1", "s3cret", 4<<20, 1<<20
	in, err := peerinput.Listen(u, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx, &sink{t: t, got: map[uint64]int{}}) }()
	to, _ := transport.ParseURI(fmt.Sprintf("peer://%s?transport=tcp", in.Addr()))
	for _, set := range [][2]string{{"f1", "wrong"}, {"f2", "s3cret"}} {
		so := peerinput.DefaultSenderOptions()
		so.Farm, so.Token, so.SendRing = set[0], set[1], 1<<20
		if snd, err := peerinput.Dial(ctx, to, so); !errors.Is(err, peer.ErrRefused) {
			if err == nil {
				snd.Close(ctx, 0)
			}
			t.Fatalf("farm %q token %q: %v, want refused", set[0], set[1], err)
		}
	}
	refused := func() map[string]uint64 { return in.Stats().Refused }
	for refused()[peer.RefusedToken]+refused()[peer.RefusedFarm] < 2 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if r := refused(); r[peer.RefusedToken] != 1 || r[peer.RefusedFarm] != 1 || len(r) != 2 {
		t.Errorf("refused %v, want token 1 and farm 1", r)
	}
	cancel()
	<-done
}
