// Package transporttest holds what the tests of the transports and of the
// emulator share: sinks that check or count what an input hands on, unique
// ring names, and benchmark children (the test binary re-executed to send
// from another process).
package transporttest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/schemas"
)

// CheckSink plays the builder's part for the tests: it counts fragments
// per (source, event id), duplicates and CRC mismatches, and releases each
// packet after Delay (a slow builder) or at once.
type CheckSink struct {
	Delay time.Duration

	mu        sync.Mutex
	seen      map[[2]uint64]bool
	packets   int
	unique    uint64
	dups      uint64
	badCRC    uint64
	fragments uint64
}

// NewCheckSink returns a sink releasing each packet after delay.
func NewCheckSink(delay time.Duration) *CheckSink {
	return &CheckSink{Delay: delay, seen: map[[2]uint64]bool{}}
}

func (s *CheckSink) AddPacket(ctx context.Context, p schemas.MFP, release func()) error {
	s.mu.Lock()
	s.packets++
	p.Fragments(func(_ int, ev uint64, crc uint32, payload []byte) bool {
		s.fragments++
		k := [2]uint64{uint64(p.SourceID), ev}
		if s.seen[k] {
			s.dups++
		} else {
			s.seen[k] = true
			s.unique++
		}
		if schemas.Checksum(payload) != crc {
			s.badCRC++
		}
		return true
	})
	s.mu.Unlock()
	if s.Delay > 0 {
		time.Sleep(s.Delay)
	}
	release()
	return nil
}

// CheckCounts are what a CheckSink saw.
type CheckCounts struct {
	Packets   int
	Fragments uint64
	Unique    uint64 // distinct (source, event id) fragments
	Dups      uint64 // fragments seen before
	BadCRC    uint64 // fragments whose CRC does not match their payload
}

// Counts returns what the sink saw so far.
func (s *CheckSink) Counts() CheckCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return CheckCounts{Packets: s.packets, Fragments: s.fragments, Unique: s.unique, Dups: s.dups, BadCRC: s.badCRC}
}

// CountSink counts packets and bytes and releases at once; Reached is
// signalled when the count passes the target set by Expect.
type CountSink struct {
	Packets, Bytes atomic.Int64
	target         atomic.Int64
	Reached        chan struct{}
}

// NewCountSink returns a counting sink.
func NewCountSink() *CountSink { return &CountSink{Reached: make(chan struct{}, 1)} }

func (s *CountSink) AddPacket(_ context.Context, p schemas.MFP, release func()) error {
	s.Bytes.Add(int64(len(p.Bytes())))
	if s.Packets.Add(1) == s.target.Load() {
		s.Reached <- struct{}{}
	}
	release()
	return nil
}

// Expect sets the count to wait for, n more than now.
func (s *CountSink) Expect(n int) { s.target.Store(s.Packets.Load() + int64(n)) }

// Run runs in until it returns (or 60 s pass) in a goroutine; the
// returned channel gets Run's error.
func Run(t testing.TB, in transport.Input, sink transport.Sink) (context.CancelFunc, chan error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	errc := make(chan error, 1)
	go func() { errc <- in.Run(ctx, sink) }()
	return cancel, errc
}

// MFP is one MFP of exactly size bytes from one source, its payload bytes
// a fixed pattern.
func MFP(source uint32, size int) []byte {
	payload := make([]byte, size-schemas.MFPHeaderSize-8)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	return schemas.AppendMFP(nil, source, 0, 0, 0, [][]byte{payload}, nil)
}

// RingPrefix starts the name of every ring this test process creates.
func RingPrefix() string { return fmt.Sprintf("sluice-test-%d-", os.Getpid()) }

// RingName returns a ring name unique to this test and process and removes
// the ring file (under dir, shm.Dir) when the test ends, with the
// temporary file a writer killed while creating it leaves.
func RingName(t testing.TB, dir string) string {
	name := RingPrefix() + strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	t.Cleanup(func() {
		tmp, _ := filepath.Glob(filepath.Join(dir, "."+name+".tmp*"))
		for _, f := range append(tmp, filepath.Join(dir, name)) {
			if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
				t.Errorf("removing ring file: %v", err)
			}
		}
	})
	return name
}

// RingsLeft lists the ring files (and temporary ones) under dir this
// process's tests created and did not remove; TestMain fails on any.
func RingsLeft(dir string) []string {
	left, _ := filepath.Glob(filepath.Join(dir, RingPrefix()+"*"))
	tmp, _ := filepath.Glob(filepath.Join(dir, "."+RingPrefix()+"*"))
	return append(left, tmp...)
}

// Benchmarks run their writer or senders in a child process (the test
// binary re-executed with envBench set), started once per benchmark and
// driven by commands on its stdin: "<verb> <count>\n", answered by "ok\n"
// once sent.
const envBench = "SLUICE_TRANSPORT_TEST_BENCH"

// ChildSetup prepares a benchmark child from the arguments StartChild
// was given and returns what handles each command and what ends the child
// once its parent closed its stdin (nil: nothing).
type ChildSetup func(args []string) (handle func(verb string, n int) error, end func(), err error)

// MaybeChild is for TestMain: when this process is a benchmark child it
// runs it with setup and exits; otherwise it returns.
func MaybeChild(setup ChildSetup) {
	args := os.Getenv(envBench)
	if args == "" {
		return
	}
	os.Exit(runChild(setup, strings.Split(args, "\x1f")))
}

func runChild(setup ChildSetup, args []string) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "bench child:", err); return 1 }
	handle, end, err := setup(args)
	if err != nil {
		return fail(err)
	}
	if end != nil {
		defer end()
	}
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "ready")
	out.Flush()
	for in.Scan() {
		verb, count, _ := strings.Cut(in.Text(), " ")
		n, _ := strconv.Atoi(count)
		if err := handle(verb, n); err != nil {
			return fail(err)
		}
		fmt.Fprintln(out, "ok")
		out.Flush()
	}
	return 0
}

// Child is a running benchmark child.
type Child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

// StartChild starts a benchmark child with args (handed to the
// ChildSetup of its TestMain) and waits until it is ready.
func StartChild(b *testing.B, args ...string) *Child {
	b.Helper()
	p := &Child{cmd: exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")}
	p.cmd.Env = append(os.Environ(), envBench+"="+strings.Join(args, "\x1f"))
	p.cmd.Stderr = os.Stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		b.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	p.out = bufio.NewScanner(stdout)
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.stdin.Close(); p.cmd.Wait() })
	if !p.out.Scan() || p.out.Text() != "ready" {
		b.Fatalf("bench child did not start: %q", p.out.Text())
	}
	return p
}

// Do sends a command; Wait reads its "ok".
func (p *Child) Do(b *testing.B, verb string, n int) {
	if _, err := fmt.Fprintf(p.stdin, "%s %d\n", verb, n); err != nil {
		b.Fatal(err)
	}
}

// Wait waits for the answer to the last command.
func (p *Child) Wait(b *testing.B) {
	if !p.out.Scan() || p.out.Text() != "ok" {
		b.Fatalf("bench child failed: %q", p.out.Text())
	}
}

// Pid is the child's process id.
func (p *Child) Pid() int { return p.cmd.Process.Pid }

// SelfCPU is this process's user+system CPU time.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ProcCPU is another process's CPU time, all its threads (ProcUsage).
func ProcCPU(pid int) time.Duration { return ProcUsage(pid).CPU }

// Usage is what a process has used so far: CPU time and times scheduled
// in, summed over its threads (/proc/PID/task/*/schedstat), and system
// calls, read-like and write-like (syscr + syscw of /proc/PID/io, its
// finished threads included). Zero for what cannot be read.
type Usage struct {
	CPU      time.Duration
	Switches uint64 // times a thread was scheduled in: wake-ups and preemptions
	Syscalls uint64
}

// Sub is u minus an earlier reading of the same process.
func (u Usage) Sub(earlier Usage) Usage {
	return Usage{CPU: u.CPU - earlier.CPU, Switches: u.Switches - earlier.Switches, Syscalls: u.Syscalls - earlier.Syscalls}
}

// Add is u plus v.
func (u Usage) Add(v Usage) Usage {
	return Usage{CPU: u.CPU + v.CPU, Switches: u.Switches + v.Switches, Syscalls: u.Syscalls + v.Syscalls}
}

// ProcUsage reads process pid's Usage.
func ProcUsage(pid int) Usage {
	var u Usage
	dir := "/proc/" + strconv.Itoa(pid)
	tasks, _ := os.ReadDir(dir + "/task")
	for _, task := range tasks {
		b, err := os.ReadFile(dir + "/task/" + task.Name() + "/schedstat")
		if f := strings.Fields(string(b)); err == nil && len(f) == 3 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			n, _ := strconv.ParseUint(f[2], 10, 64)
			u.CPU += time.Duration(ns)
			u.Switches += n
		}
	}
	b, _ := os.ReadFile(dir + "/io")
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		if k == "syscr" || k == "syscw" {
			n, _ := strconv.ParseUint(v, 10, 64)
			u.Syscalls += n
		}
	}
	return u
}

// LogBuffer is a log sink an input's goroutines and the test share: the
// test reads what was logged while the input may still write.
type LogBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything logged so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
