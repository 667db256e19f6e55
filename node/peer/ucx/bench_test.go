//go:build ucx

package ucx_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/peer/peertest"
)

// The UCX benchmarks compare this transport, between this process and a
// sink process, with ucx_perftest between two processes of its own, run in
// the same benchmark, alternating, with the same UCX_TLS and the flags that
// match what the transport does: -e (peer error handling), -E sleep
// (wake-up mode) and -z (pre-registered memory handles). ucx_perftest
// reports its own timing (without its start-up), so the rounds are timed
// separately instead of by benchratio.Compare, whose baseline is timed
// from the outside; the ratio is this transport's figure over
// ucx_perftest's, per run (scripts/bench.sh takes the median of runs).

// rounds per benchmark run, alternating subject and baseline.
const rounds = 3

var benchTLS = []struct {
	name string
	env  []string
}{
	{"tcp", []string{"UCX_TLS=tcp", "UCX_NET_DEVICES=lo"}},
	{"sm", []string{"UCX_TLS=sm,tcp", "UCX_NET_DEVICES=lo", "UCX_MM_ERROR_HANDLING=y"}},
}

func setEnv(b *testing.B, env []string) {
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		b.Setenv(k, v)
	}
}

// perftest runs one ucx_perftest pair (peertest.Perftest).
func perftest(b *testing.B, env []string, args ...string) peertest.PerfResult {
	return peertest.Perftest(b, env, args...)
}

// BenchmarkDataVsPerftest: data messages of 64 KiB, 1 MiB and 8 MiB to the
// sink process vs ucx_perftest -t tag_bw with the same size.
func BenchmarkDataVsPerftest(b *testing.B) {
	for _, tls := range benchTLS {
		for _, size := range []int{64 << 10, 1 << 20, 8 << 20} {
			b.Run(fmt.Sprintf("%s/%dKiB", tls.name, size>>10), func(b *testing.B) {
				setEnv(b, tls.env)
				bn := peertest.StartBench(b, factory, size, false, tls.env...)
				n := max(32, (256<<20)/size)
				bn.Data(b, n/8, size) // warm up (the pool's pages, UCX's lanes)
				// ucx_perftest's own start-up CPU, measured once and taken off.
				idle := perftest(b, tls.env, "-t", "tag_bw", "-s", strconv.Itoa(size), "-n", "1", "-w", "0", "-z").CPU
				// The second baseline sends every message by rendezvous, as
				// this transport does (the receiver fetches the payload
				// into a pool slot it has room for): UCX_RNDV_THRESH=0. At
				// 64 KiB plain tag_bw sends eagerly, without the round trip.
				rndvEnv := append(append([]string(nil), tls.env...), "UCX_RNDV_THRESH=0")
				var mine, theirs, rndv, cpuMine, cpuTheirs float64
				b.ResetTimer()
				for r := 0; r < rounds; r++ {
					c0, t0 := bn.CPU(), time.Now()
					bn.Data(b, n, size)
					d, cpu := time.Since(t0), bn.CPU()-c0
					mine += float64(n*size) / d.Seconds() / 1e6
					cpuMine += float64(cpu.Nanoseconds()) / float64(n*size)
					args := []string{"-t", "tag_bw", "-s", strconv.Itoa(size), "-n", strconv.Itoa(n), "-w", strconv.Itoa(n / 8), "-z"}
					p := perftest(b, tls.env, args...)
					theirs += p.MBs
					cpuTheirs += float64(max(p.CPU-idle, 0).Nanoseconds()) / float64((n+n/8)*size)
					rndv += perftest(b, rndvEnv, args...).MBs
				}
				b.StopTimer()
				b.ReportMetric(mine/rounds, "MB/s")
				b.ReportMetric(theirs/rounds, "baseline_MB/s")
				b.ReportMetric(mine/theirs, "ratio")
				b.ReportMetric(rndv/rounds, "rndv_baseline_MB/s")
				b.ReportMetric(mine/rndv, "rndv_ratio")
				b.ReportMetric(cpuMine/rounds, "cpu_ns/B")
				b.ReportMetric(cpuTheirs/rounds, "baseline_cpu_ns/B")
			})
		}
	}
}

// BenchmarkControlVsPerftest: 8-byte control messages per second to the
// sink process vs ucx_perftest -t ucp_am_bw -s 8.
func BenchmarkControlVsPerftest(b *testing.B) {
	const n = 200000
	for _, tls := range benchTLS {
		b.Run(tls.name, func(b *testing.B) {
			setEnv(b, tls.env)
			bn := peertest.StartBench(b, factory, 4096, false, tls.env...)
			bn.Control(b, n/10, 8)
			var mine, theirs, cpuMine, cpuTheirs float64
			idle := perftest(b, tls.env, "-t", "ucp_am_bw", "-s", "8", "-n", "1", "-w", "0").CPU
			b.ResetTimer()
			for r := 0; r < rounds; r++ {
				c0, t0 := bn.CPU(), time.Now()
				bn.Control(b, n, 8)
				d, cpu := time.Since(t0), bn.CPU()-c0
				mine += n / d.Seconds()
				cpuMine += float64(cpu.Nanoseconds()) / n
				p := perftest(b, tls.env, "-t", "ucp_am_bw", "-s", "8", "-n", strconv.Itoa(n), "-w", strconv.Itoa(n/10))
				theirs += p.Rate
				cpuTheirs += float64(max(p.CPU-idle, 0).Nanoseconds()) / (n + n/10)
			}
			b.StopTimer()
			b.ReportMetric(mine/rounds, "msgs/s")
			b.ReportMetric(theirs/rounds, "baseline_msgs/s")
			b.ReportMetric(mine/theirs, "ratio")
			b.ReportMetric(cpuMine/rounds, "cpu_ns/msg")
			b.ReportMetric(cpuTheirs/rounds, "baseline_cpu_ns/msg")
		})
	}
}

// BenchmarkLatencyVsPerftest: half the round trip of an empty control
// message to the sink process and back vs ucx_perftest -t ucp_am_lat -s 8.
// ratio is ucx_perftest's latency over ours (1 = as fast).
func BenchmarkLatencyVsPerftest(b *testing.B) {
	const n = 20000
	for _, tls := range benchTLS {
		b.Run(tls.name, func(b *testing.B) {
			setEnv(b, tls.env)
			bn := peertest.StartBench(b, factory, 4096, false, tls.env...)
			bn.PingPong(b, n/10)
			var mine, theirs float64
			b.ResetTimer()
			for r := 0; r < rounds; r++ {
				t0 := time.Now()
				bn.PingPong(b, n)
				mine += float64(time.Since(t0).Microseconds()) / n / 2
				theirs += perftest(b, tls.env, "-t", "ucp_am_lat", "-s", "8", "-n", strconv.Itoa(n), "-w", strconv.Itoa(n/10)).LatUs
			}
			b.StopTimer()
			b.ReportMetric(mine/rounds, "us")
			b.ReportMetric(theirs/rounds, "baseline_us")
			b.ReportMetric(theirs/mine, "ratio")
		})
	}
}
