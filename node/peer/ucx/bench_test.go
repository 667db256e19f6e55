//go:build ucx

package ucx_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
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

// perfResult is what one ucx_perftest run reported.
type perfResult struct {
	latUs, mbs, rate float64       // average latency (µs), overall bandwidth (10^6 B/s), overall message rate
	cpu              time.Duration // both processes, user+system
}

func freePort(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// perftest runs one ucx_perftest server/client pair on loopback.
func perftest(b *testing.B, env []string, args ...string) perfResult {
	b.Helper()
	bin, err := exec.LookPath("ucx_perftest")
	if err != nil {
		b.Skip("ucx_perftest not installed (Debian: ucx-utils)")
	}
	port := freePort(b)
	args = append(args, "-p", port, "-e", "-E", "sleep", "-f")
	srv := exec.Command(bin, args...)
	srv.Env = append(srv.Environ(), env...)
	var srvOut bytes.Buffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	srv.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		if srv.ProcessState == nil {
			srv.Process.Kill()
			srv.Wait()
		}
	}()
	var out []byte
	var cli *exec.Cmd
	for try := 0; ; try++ {
		cli = exec.Command(bin, append([]string{"127.0.0.1"}, args...)...)
		cli.Env = srv.Env
		out, err = cli.CombinedOutput()
		if err == nil {
			break
		}
		if try == 100 {
			b.Fatalf("ucx_perftest %v: %v\n%s\nserver:\n%s", args, err, out, srvOut.Bytes())
		}
		time.Sleep(20 * time.Millisecond) // the server is not listening yet
	}
	if err := srv.Wait(); err != nil {
		b.Fatalf("ucx_perftest server: %v\n%s", err, srvOut.Bytes())
	}
	r := perfResult{cpu: cpuOf(srv) + cpuOf(cli)}
	// The result row: iterations, latency/overhead 50%ile, average,
	// overall (µs), bandwidth average, overall (MB/s, 2^20 B), message
	// rate average, overall.
	sc := bufio.NewScanner(bytes.NewReader(out))
	found := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 8 {
			continue
		}
		var v [8]float64
		ok := true
		for i := range f {
			if v[i], err = strconv.ParseFloat(f[i], 64); err != nil {
				ok = false
			}
		}
		if ok {
			r.latUs, r.mbs, r.rate, found = v[2], v[5]*(1<<20)/1e6, v[7], true
		}
	}
	if !found {
		b.Fatalf("no result row in ucx_perftest's output:\n%s", out)
	}
	return r
}

func cpuOf(c *exec.Cmd) time.Duration {
	ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
				idle := perftest(b, tls.env, "-t", "tag_bw", "-s", strconv.Itoa(size), "-n", "1", "-w", "0", "-z").cpu
				var mine, theirs, cpuMine, cpuTheirs float64
				b.ResetTimer()
				for r := 0; r < rounds; r++ {
					c0, t0 := bn.CPU(), time.Now()
					bn.Data(b, n, size)
					d, cpu := time.Since(t0), bn.CPU()-c0
					mine += float64(n*size) / d.Seconds() / 1e6
					cpuMine += float64(cpu.Nanoseconds()) / float64(n*size)
					p := perftest(b, tls.env, "-t", "tag_bw", "-s", strconv.Itoa(size), "-n", strconv.Itoa(n), "-w", strconv.Itoa(n/8), "-z")
					theirs += p.mbs
					cpuTheirs += float64(max(p.cpu-idle, 0).Nanoseconds()) / float64((n+n/8)*size)
				}
				b.StopTimer()
				b.ReportMetric(mine/rounds, "MB/s")
				b.ReportMetric(theirs/rounds, "baseline_MB/s")
				b.ReportMetric(mine/theirs, "ratio")
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
			idle := perftest(b, tls.env, "-t", "ucp_am_bw", "-s", "8", "-n", "1", "-w", "0").cpu
			b.ResetTimer()
			for r := 0; r < rounds; r++ {
				c0, t0 := bn.CPU(), time.Now()
				bn.Control(b, n, 8)
				d, cpu := time.Since(t0), bn.CPU()-c0
				mine += n / d.Seconds()
				cpuMine += float64(cpu.Nanoseconds()) / n
				p := perftest(b, tls.env, "-t", "ucp_am_bw", "-s", "8", "-n", strconv.Itoa(n), "-w", strconv.Itoa(n/10))
				theirs += p.rate
				cpuTheirs += float64(max(p.cpu-idle, 0).Nanoseconds()) / (n + n/10)
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
				theirs += perftest(b, tls.env, "-t", "ucp_am_lat", "-s", "8", "-n", strconv.Itoa(n), "-w", strconv.Itoa(n/10)).latUs
			}
			b.StopTimer()
			b.ReportMetric(mine/rounds, "us")
			b.ReportMetric(theirs/rounds, "baseline_us")
			b.ReportMetric(theirs/mine, "ratio")
		})
	}
}
