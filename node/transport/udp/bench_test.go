package udp

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/node/internal/transporttest"
)

var (
	udpSearch         sync.Once
	udpBest, udpPlain float64
)

// BenchmarkUDPInput finds the highest rate (datagrams/s, 8 KiB MFPs, from a
// child process, nominal rates from 10k/s in steps of 1.2x up to 8M/s) at
// which a UDPInput with a counting sink receives 20000 datagrams with none
// lost, and reports it as lossless_dgrams/s: the rate the sender reached
// (at most the nominal one), so a sender that cannot go faster ends the
// search rather than making every faster nominal rate look lossless; b.N
// datagrams are then sent at that rate (ns/op is its pace). The baseline
// is the same search against a plain socket of the same receive buffer
// (set the same way) read by the same recvmmsg batches
// (golang.org/x/net ReadBatch, recvBatch datagrams) into reused buffers,
// counted and nothing else, fed by the same sender code from the same
// child; ratio is the input's lossless rate over the plain socket's.
func BenchmarkUDPInput(b *testing.B) {
	const size = 8 << 10
	in, err := Listen("127.0.0.1:0", Options{LatencyBudget: 50 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	sink := transporttest.NewCountSink()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx, sink) }()
	defer func() { cancel(); <-done }()
	plain, plainCount := plainUDP(b, in.cfg.SocketBuffer)
	child := transporttest.StartChild(b, "udp", in.Addr().String(), plain.LocalAddr().String(), strconv.Itoa(size))
	// sendTo sends n datagrams at rate, with the child's verb prefix, to
	// the receiver whose datagrams received counts, and reports whether
	// all arrived with lost() still false, and the rate the sender reached
	// (below rate when it cannot send faster).
	sendTo := func(prefix string, received func() int64, lost func() uint64) func(rate float64, n int) (bool, float64) {
		return func(rate float64, n int) (bool, float64) {
			lost0, p0 := lost(), received()
			t0 := time.Now()
			child.Do(b, prefix+strconv.FormatFloat(rate, 'f', 0, 64), n)
			child.Wait(b)
			sent := float64(n) / time.Since(t0).Seconds()
			for deadline := time.Now().Add(2 * time.Second); received()-p0 < int64(n) && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			return lost() == lost0 && received()-p0 == int64(n), min(rate, sent)
		}
	}
	send := sendTo("", sink.Packets.Load, func() uint64 { return in.Stats().Lost })
	// The plain socket counts what it reads: a datagram is lost or not,
	// none can arrive twice.
	sendPlain := sendTo("b:", plainCount.Load, func() uint64 { return 0 })
	// The searches run once per process (the framework calls the benchmark
	// first with b.N = 1, then with the real b.N), alternating step by
	// step so that both see the same noise. A step's figure is the rate
	// the sender reached, which is the nominal one until the sender cannot
	// go faster: a search stops at the first loss, or when the sender has
	// stopped getting faster.
	udpSearch.Do(func() {
		searches := []struct {
			send func(float64, int) (bool, float64)
			best *float64
			on   bool
		}{{send, &udpBest, true}, {sendPlain, &udpPlain, true}}
		for rate := 10000.0; rate <= 8e6 && (searches[0].on || searches[1].on); rate *= 1.2 {
			for i := range searches {
				s := &searches[i]
				if !s.on {
					continue
				}
				ok, got := s.send(rate, 20000)
				s.on = ok && (got > 0.9*rate || got > *s.best) // still keeping up, or still faster
				if ok {
					*s.best = max(*s.best, got)
				}
			}
		}
	})
	best := udpBest
	if best == 0 {
		b.Skip("UDP loses datagrams even at 10000/s on this machine")
	}
	b.ResetTimer()
	_, _ = send(best, b.N)
	b.StopTimer()
	b.ReportMetric(best, "lossless_dgrams/s")
	b.ReportMetric(best*size/1e6, "lossless_MB/s")
	b.ReportMetric(float64(in.Stats().SocketBufferBytes), "rcvbuf_bytes")
	b.ReportMetric(udpPlain, "baseline_lossless_dgrams/s")
	if udpPlain > 0 {
		b.ReportMetric(best/udpPlain, "ratio")
	}
}

// plainUDP is the baseline's receiver: a socket on the loopback with
// socketBuffer bytes of receive buffer (forced as Listen forces it), read
// in recvBatch batches into reused buffers by a goroutine that counts the
// datagrams, until the benchmark ends.
func plainUDP(b *testing.B, socketBuffer conf.ByteSize) (*net.UDPConn, *atomic.Int64) {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	forced := false
	if rc, err := conn.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			forced = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, int(socketBuffer)) == nil
		})
	}
	if !forced {
		conn.SetReadBuffer(int(socketBuffer))
	}
	var count atomic.Int64
	go func() {
		pc := ipv4.NewPacketConn(conn)
		msgs := make([]ipv4.Message, recvBatch)
		for i := range msgs {
			msgs[i].Buffers = [][]byte{make([]byte, MaxDatagram)}
		}
		for {
			n, err := pc.ReadBatch(msgs, 0)
			if err != nil {
				return
			}
			count.Add(int64(n))
		}
	}()
	return conn, &count
}
