package peertest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/peer"
)

// Helper processes are the test binary run again with PEERTEST_ROLE set:
// Main runs the role instead of the tests. Roles:
//   - send: connect to PEERTEST_ADDR and send data messages of
//     PEERTEST_SIZE bytes (and a control message after each) until killed;
//   - hold: connect, receive and never release (its pool fills up);
//   - idle: connect and do nothing (heartbeats keep the Conn up).
//
// Each prints "ready" on stdout once connected.
const (
	envRole  = "PEERTEST_ROLE"
	envAddr  = "PEERTEST_ADDR"
	envNode  = "PEERTEST_NODE"
	envSize  = "PEERTEST_SIZE"
	envPlain = "PEERTEST_PLAIN"
	// helperHeartbeat is the helpers' Config.Heartbeat.
	helperHeartbeat = 25 * time.Millisecond
)

// Main is the transport test's TestMain: in a helper process it runs the
// helper's role and exits; otherwise it runs the tests.
func Main(m *testing.M, f Factory) {
	if role := os.Getenv(envRole); role != "" {
		if err := helper(f, role); err != nil && !errors.Is(err, peer.ErrPeerClosed) {
			fmt.Fprintln(os.Stderr, "peertest helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func helper(f Factory, role string) error {
	cfg := Config(os.Getenv(envNode))
	cfg.Heartbeat, cfg.PeerTimeout = helperHeartbeat, 2*time.Second // testStop: short silences; the parent beats at its own pace
	size, _ := strconv.Atoi(os.Getenv(envSize))
	if role == "sink" {
		cfg.PeerTimeout = 10 * time.Second // as the benchmark's side
	}
	if role == "hold" {
		cfg.PoolBytes, cfg.MaxData = 64<<20, 8<<20
	}
	tr, err := peer.Open(f.Name, cfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	c, err := tr.Connect(ctx, os.Getenv(envAddr))
	if err != nil {
		return err
	}
	fmt.Println("ready")
	switch role {
	case "send":
		r, err := tr.AllocRegion(size)
		if err != nil {
			return err
		}
		for i := uint64(0); ; i++ {
			fill(r.Bytes()[:size], i)
			done := make(chan error, 1)
			if err := c.SendData(ctx, hdr(i), r.Slice(0, size), func(err error) { done <- err }); err != nil {
				return err
			}
			if err := <-done; err != nil {
				return err
			}
			if err := c.SendControl(ctx, 1, hdr(i)); err != nil {
				return err
			}
		}
	case "hold":
		for {
			if _, err := c.Recv(ctx); err != nil {
				return err
			}
		}
	case "idle":
		<-c.Done()
		return c.Err()
	case "sink":
		if f := os.Getenv("PEERTEST_SINK_CPUPROFILE"); f != "" {
			profile(f, time.Second) // where a benchmark's receiving side spends its time
		}
		if a := os.Getenv(envPlain); a != "" {
			go plainSink(a)
		}
		return sink(ctx, c)
	}
	return fmt.Errorf("unknown role %q", role)
}

// child is a running helper process.
type child struct {
	cmd  *exec.Cmd
	node string
}

// startHelper runs the test binary as a helper of role connecting to addr
// and waits for its "ready".
func startHelper(t testing.TB, role, node, addr string, size int, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"="+role, envNode+"="+node, envAddr+"="+addr, envSize+"="+strconv.Itoa(size))
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := &child{cmd: cmd, node: node}
	t.Cleanup(ch.kill)
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(out).ReadString('\n')
		if err == nil && line != "ready\n" {
			err = fmt.Errorf("helper said %q", line)
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("helper %s: %v", role, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("helper %s not ready after 20s", role)
	}
	return ch
}

func (c *child) signal(s syscall.Signal) { c.cmd.Process.Signal(s) }

func (c *child) kill() {
	if c.cmd.ProcessState == nil {
		c.cmd.Process.Signal(syscall.SIGCONT)
		c.cmd.Process.Kill()
		c.cmd.Wait()
	}
}

// profile writes a CPU profile of the next d to file.
func profile(file string, d time.Duration) {
	f, err := os.Create(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, "peertest sink profile:", err)
		return
	}
	pprof.StartCPUProfile(f)
	time.AfterFunc(d, func() {
		pprof.StopCPUProfile()
		f.Close()
	})
}
