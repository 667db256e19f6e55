package udp

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/internal/transporttest"
)

var (
	udpSearch sync.Once
	udpBest   float64
)

// BenchmarkUDPInput finds the highest rate (datagrams/s, 8 KiB MFPs, from a
// child process, from 10k/s in steps of 1.5x) at which a UDPInput with a counting
// sink receives 20000 datagrams with none lost, and reports it as
// lossless_dgrams/s; b.N datagrams are then sent at that rate (ns/op is
// its pace).
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
	child := transporttest.StartChild(b, "udp", in.Addr().String(), strconv.Itoa(size))
	// send n datagrams at rate and report whether all arrived.
	send := func(rate float64, n int) bool {
		lost0, p0 := in.Stats().Lost, sink.Packets.Load()
		child.Do(b, strconv.FormatFloat(rate, 'f', 0, 64), n)
		child.Wait(b)
		deadline := time.Now().Add(2 * time.Second)
		for sink.Packets.Load()-p0 < int64(n) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		return in.Stats().Lost == lost0 && sink.Packets.Load()-p0 == int64(n)
	}
	// The search runs once per process: the framework calls the benchmark
	// first with b.N = 1, then with the real b.N.
	udpSearch.Do(func() {
		for rate := 10000.0; rate <= 1.28e6; rate *= 1.5 {
			if !send(rate, 20000) {
				break
			}
			udpBest = rate
		}
	})
	best := udpBest
	if best == 0 {
		b.Skip("UDP loses datagrams even at 10000/s on this machine")
	}
	b.ResetTimer()
	send(best, b.N)
	b.StopTimer()
	b.ReportMetric(best, "lossless_dgrams/s")
	b.ReportMetric(best*size/1e6, "lossless_MB/s")
	b.ReportMetric(float64(in.Stats().SocketBufferBytes), "rcvbuf_bytes")
}
