package peerinput_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/builder"
	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/node/internal/transporttest"
	"github.com/sluice-daq/sluice/node/peer"
	"github.com/sluice-daq/sluice/node/peer/peertest"
	"github.com/sluice-daq/sluice/node/peerinput"
	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/schemas"
)

// Event building alone: K readout-unit processes (children of the
// benchmark) each send one source's fragments, one MFP per event, over a
// peer transport into this process's peer input and its event builder
// (null trigger: the batches are released as they come; no store). The
// figure is the bytes that crossed between the processes per second, from
// the first send to the last fragment built into a complete event. The
// baseline, measured alternately in the same run with the same message
// size and K concurrent pairs:
//   - ucx: K ucx_perftest -t tag_bw pairs at once, with the transport's
//     flags (-e, -E sleep, -z) and UCX_TLS, their reported bandwidths
//     added; and again with UCX_RNDV_THRESH=0, every message by
//     rendezvous as the transport sends its data (rndv_ratio);
//   - tcp: plain Go TCP, the same K child processes writing the same
//     bytes over one connection each into this process, read into a
//     reused buffer.
const (
	buildSenders = 4
	buildRounds  = 3
)

// buildTLS is UCX's transport for the ucx runs: TCP on loopback. (With
// UCX_TLS=sm,tcp and four senders, UCX's shared memory in sleep mode ran
// at a third of that on this machine and once timed an endpoint out under
// load: not a figure to plan with.)
var buildTLS = []string{"UCX_TLS=tcp", "UCX_NET_DEVICES=lo"}

func BenchmarkBuild(b *testing.B) {
	for _, kind := range peer.Names() {
		for _, size := range []int{64 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("%s/%dKiB", kind, size>>10), func(b *testing.B) {
				var env []string
				if kind == "ucx" {
					env = buildTLS
					for _, kv := range env {
						k, v, _ := strings.Cut(kv, "=")
						b.Setenv(k, v)
					}
				}
				benchBuild(b, kind, size, env)
			})
		}
	}
}

func benchBuild(b *testing.B, kind string, size int, env []string) {
	srcs := make([]uint32, buildSenders)
	for i := range srcs {
		srcs[i] = uint32(i)
	}
	bld, err := builder.New(builder.Config{Groups: []schemas.SourceGroup{{Name: "tracker", Sources: srcs}},
		BatchEvents: max(1, (4<<20)/(buildSenders*size)), BatchLatency: time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for rec := range bld.Batches() {
			rec.Release() // null trigger, no store
		}
	}()
	defer func() { bld.Close(context.Background()); <-drained }()
	u, err := transport.ParseURI("peer://127.0.0.1:0?transport=" + kind)
	if err != nil {
		b.Fatal(err)
	}
	// Four senders and the builder on two cores: a sender can be starved
	// for longer than the default half second of silence.
	in, err := peerinput.Listen(u, peerinput.Options{Node: "bu", Pool: 256 << 20, MaxPacket: conf.ByteSize(size), PeerTimeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- in.Run(ctx, bld) }()
	defer func() { cancel(); <-ran }()

	var plain *plainCounter
	plainAddr := "-"
	if kind != "ucx" {
		plain = newPlainCounter(b)
		plainAddr = plain.addr()
	}
	children := make([]*transporttest.Child, buildSenders)
	for i := range children {
		children[i] = transporttest.StartChild(b, kind, in.Addr(), strconv.Itoa(i), strconv.Itoa(size), plainAddr)
	}
	do := func(verb string, n int) {
		for _, c := range children {
			c.Do(b, verb, n)
		}
		for _, c := range children {
			c.Wait(b)
		}
	}
	build := func(n int) time.Duration {
		target := bld.Ledger().FragmentsInEvents + uint64(n*buildSenders)
		t0 := time.Now()
		do("s", n)
		for bld.Ledger().FragmentsInEvents < target {
			time.Sleep(50 * time.Microsecond)
		}
		return time.Since(t0)
	}
	n := max(32, (256<<20)/(size*buildSenders)) // per sender and round
	build(n / 8)                                // warm up: pool pages, lanes
	perf := []string{"-t", "tag_bw", "-s", strconv.Itoa(size), "-n", strconv.Itoa(n), "-w", strconv.Itoa(n / 8), "-z"}
	rndvEnv := append(append([]string(nil), env...), "UCX_RNDV_THRESH=0")
	var mine, theirs, rndv float64
	b.ResetTimer()
	for r := 0; r < buildRounds; r++ {
		mine += float64(n*buildSenders*size) / build(n).Seconds() / 1e6
		if kind == "ucx" {
			for _, p := range peertest.PerftestPairs(b, buildSenders, env, perf...) {
				theirs += p.MBs
			}
			for _, p := range peertest.PerftestPairs(b, buildSenders, rndvEnv, perf...) {
				rndv += p.MBs
			}
			continue
		}
		target := plain.bytes.Load() + int64(n*buildSenders*size)
		t0 := time.Now()
		do("b", n)
		for plain.bytes.Load() < target {
			time.Sleep(50 * time.Microsecond)
		}
		theirs += float64(n*buildSenders*size) / time.Since(t0).Seconds() / 1e6
	}
	b.StopTimer()
	l := bld.Ledger()
	if l.EventsIncomplete != 0 || l.Discards() != 0 {
		b.Fatalf("events built incomplete or fragments discarded: %+v", l)
	}
	b.ReportMetric(mine/buildRounds, "MB/s")
	b.ReportMetric(theirs/buildRounds, "baseline_MB/s")
	b.ReportMetric(mine/theirs, "ratio")
	if kind == "ucx" {
		b.ReportMetric(rndv/buildRounds, "rndv_baseline_MB/s")
		b.ReportMetric(mine/rndv, "rndv_ratio")
	}
}

// plainCounter is the plain-TCP baseline's receiving end: it counts the
// bytes of every connection, read into a reused buffer per connection.
type plainCounter struct {
	ln    net.Listener
	bytes atomic.Int64
}

func newPlainCounter(b *testing.B) *plainCounter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	p := &plainCounter{ln: ln}
	var wg sync.WaitGroup
	b.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.(*net.TCPConn).SetReadBuffer(4 << 20)
			wg.Go(func() {
				defer c.Close()
				buf := make([]byte, 1<<20)
				for {
					k, err := c.Read(buf)
					p.bytes.Add(int64(k))
					if err != nil {
						return
					}
				}
			})
		}
	})
	return p
}

func (p *plainCounter) addr() string { return p.ln.Addr().String() }

// buildBenchChild is one readout unit of BenchmarkBuild; args: transport
// kind, the input's address, its source id, the message size, the plain
// baseline's address ("-": none). Verb "s" sends n MFPs (the next n
// events) from rotating pieces of a registered region, waiting until each
// send completed; "b" writes the same bytes on the plain connection.
func buildBenchChild(args []string) (func(string, int) error, func(), error) {
	if len(args) != 5 {
		return nil, nil, fmt.Errorf("want kind, address, source, size, plain address; got %q", args)
	}
	kind, addr := args[0], args[1]
	src, _ := strconv.Atoi(args[2])
	size, _ := strconv.Atoi(args[3])
	ctx := context.Background()
	tr, err := peer.Open(kind, peer.Config{Node: "ru" + args[2], Listen: "127.0.0.1:0", PoolBytes: 1 << 20, MaxData: 1 << 20,
		SendQueue: 256, PeerTimeout: 10 * time.Second})
	if err != nil {
		return nil, nil, err
	}
	c, err := tr.Connect(ctx, addr)
	if err != nil {
		tr.Close()
		return nil, nil, err
	}
	pieces := max(8, min(256, (64<<20)/size))
	r, err := tr.AllocRegion(pieces * size)
	if err != nil {
		tr.Close()
		return nil, nil, err
	}
	mfp := transporttest.MFP(uint32(src), size)
	free := make(chan int, pieces)
	for k := range pieces {
		copy(r.Bytes()[k*size:], mfp)
		free <- k
	}
	var plain net.Conn
	if args[4] != "-" {
		if plain, err = net.Dial("tcp", args[4]); err != nil {
			return nil, nil, err
		}
		plain.(*net.TCPConn).SetWriteBuffer(4 << 20)
	}
	var next uint64
	var failed atomic.Pointer[error]
	handle := func(verb string, n int) error {
		for i := range n {
			k := <-free
			piece := r.Bytes()[k*size : (k+1)*size]
			if verb == "b" {
				_, err := plain.Write(piece)
				free <- k
				if err != nil {
					return err
				}
				continue
			}
			binary.LittleEndian.PutUint64(piece[16:], next) // first_event_id
			next++
			err := c.SendData(ctx, nil, r.Slice(k*size, size), func(err error) {
				if err != nil {
					failed.CompareAndSwap(nil, &err)
				}
				free <- k
			})
			if err != nil {
				return fmt.Errorf("send %d: %w", i, err)
			}
		}
		for range pieces { // every send completed
			<-free
		}
		for k := range pieces {
			free <- k
		}
		if e := failed.Load(); e != nil {
			return *e
		}
		return nil
	}
	end := func() {
		if plain != nil {
			plain.Close()
		}
		c.Close()
		r.Close()
		tr.Close()
	}
	return handle, end, nil
}
