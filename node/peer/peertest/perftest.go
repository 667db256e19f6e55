package peertest

import (
	"bufio"
	"bytes"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// PerfResult is what one ucx_perftest client reported.
type PerfResult struct {
	LatUs, MBs, Rate float64       // average latency (µs), overall bandwidth (10^6 B/s), overall message rate
	CPU              time.Duration // server and client process, user+system
}

// Perftest runs one ucx_perftest server/client pair on loopback with env
// (UCX_TLS=...) and args, adding -e (peer error handling) -E sleep
// (wake-up mode) and -f; it skips the benchmark when ucx_perftest is not
// installed (Debian: ucx-utils).
func Perftest(b *testing.B, env []string, args ...string) PerfResult {
	return PerftestPairs(b, 1, env, args...)[0]
}

// PerftestPairs runs n ucx_perftest pairs at once, each as Perftest.
func PerftestPairs(b *testing.B, n int, env []string, args ...string) []PerfResult {
	b.Helper()
	bin, err := exec.LookPath("ucx_perftest")
	if err != nil {
		b.Skip("ucx_perftest not installed (Debian: ucx-utils)")
	}
	out := make([]PerfResult, n)
	errs := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			// A port found free may be taken before the server binds it
			// (other pairs, other processes): then try another.
			for try := 0; try < 5; try++ {
				var retry bool
				if out[i], errs[i], retry = perftestPair(bin, freePort(b), env, args); !retry {
					return
				}
			}
		})
	}
	wg.Wait()
	for _, e := range errs {
		if e != "" {
			b.Fatal(e)
		}
	}
	return out
}

func freePort(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// perftestPair runs one pair; the string is what went wrong, "" if
// nothing; retry: the server could not bind its port.
func perftestPair(bin, port string, env, args []string) (_ PerfResult, _ string, retry bool) {
	args = append(append([]string(nil), args...), "-p", port, "-e", "-E", "sleep", "-f")
	srv := exec.Command(bin, args...)
	srv.Env = append(srv.Environ(), env...)
	var srvOut bytes.Buffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	srv.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := srv.Start(); err != nil {
		return PerfResult{}, err.Error(), false
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	var srvErr error
	srvDone := false
	defer func() {
		if !srvDone {
			srv.Process.Kill()
			<-exited
		}
	}()
	var out []byte
	var cli *exec.Cmd
	var err error
	for try := 0; ; try++ {
		cli = exec.Command(bin, append([]string{"127.0.0.1"}, args...)...)
		cli.Env = srv.Env
		out, err = cli.CombinedOutput()
		if err == nil {
			break
		}
		select {
		case srvErr = <-exited:
			srvDone = true
		default:
		}
		if try == 100 || srvDone {
			return PerfResult{}, "ucx_perftest " + strings.Join(args, " ") + ": " + err.Error() + "\n" + string(out) + "\nserver:\n" + srvOut.String(),
				srvDone && strings.Contains(srvOut.String(), "bind() failed")
		}
		time.Sleep(20 * time.Millisecond) // the server is not listening yet
	}
	if !srvDone {
		srvErr, srvDone = <-exited, true
	}
	if srvErr != nil {
		return PerfResult{}, "ucx_perftest server: " + srvErr.Error() + "\n" + srvOut.String(), false
	}
	r := PerfResult{CPU: cpuOf(srv) + cpuOf(cli)}
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
			r.LatUs, r.MBs, r.Rate, found = v[2], v[5]*(1<<20)/1e6, v[7], true
		}
	}
	if !found {
		return PerfResult{}, "no result row in ucx_perftest's output:\n" + string(out), false
	}
	return r, "", false
}

func cpuOf(c *exec.Cmd) time.Duration {
	ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
