package tcp_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/internal/benchratio"
	"github.com/sluice-daq/sluice/node/peer/peertest"
)

// BenchmarkPeerData: data messages from this process to a sink process
// over the TCP peer transport (subject) vs the same bytes as plain framed
// writes on one Go TCP connection between the same two processes, same
// socket buffers, same source buffers, the sink reading into a reused
// buffer (baseline). cpu_ns/B is the CPU of both processes per payload byte.
func BenchmarkPeerData(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20, 8 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			bn := peertest.StartBench(b, factory, size, true)
			b.SetBytes(int64(size))
			var cpuS, cpuB time.Duration
			benchratio.Compare(b,
				func(n int) {
					c0 := bn.CPU()
					bn.Data(b, n, size)
					cpuS += bn.CPU() - c0
				},
				func(n int) {
					c0 := bn.CPU()
					bn.PlainData(b, n, size)
					cpuB += bn.CPU() - c0
				})
			bytes := float64(b.N) * float64(size)
			b.ReportMetric(float64(cpuS.Nanoseconds())/bytes, "cpu_ns/B")
			b.ReportMetric(float64(cpuB.Nanoseconds())/bytes, "baseline_cpu_ns/B")
		})
	}
}

// BenchmarkPeerControl: 8-byte control messages per second to the sink
// process (credits and all), no baseline (see the UCX benchmark for one).
func BenchmarkPeerControl(b *testing.B) {
	bn := peertest.StartBench(b, factory, 4096, false)
	b.ResetTimer()
	bn.Control(b, b.N, 8)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
