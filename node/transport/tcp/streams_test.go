package tcp

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/node/internal/transporttest"
	"github.com/sluice-daq/sluice/schemas"
)

// pinSink plays a builder waiting for stragglers: it holds every fourth
// packet for hold (its event waits for another source) and releases the
// others at once, so that most chunks a connection reads into are pinned
// by one small frame for a while.
type pinSink struct {
	hold time.Duration

	mu      sync.Mutex
	n       int
	pinned  []pin
	peak    int
	stopped bool
}

type pin struct {
	at      time.Time
	release func()
}

func (s *pinSink) AddPacket(_ context.Context, _ schemas.MFP, release func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n++; s.n%4 != 0 || s.stopped {
		release()
		return nil
	}
	s.pinned = append(s.pinned, pin{time.Now(), release})
	s.peak = max(s.peak, len(s.pinned))
	return nil
}

// expire releases what was held for s.hold (all of it when all is set).
func (s *pinSink) expire(all bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := 0
	for k < len(s.pinned) && (all || time.Since(s.pinned[k].at) >= s.hold) {
		s.pinned[k].release()
		k++
	}
	s.pinned = s.pinned[k:]
	s.stopped = s.stopped || all
}

// TestManyStreamsMemory: 1000 real connections of small frames into one
// input, whose sink pins a frame in every few for 100 ms, must stay
// within the memory the node's budget plans for the input
// (Options.MemoryBytes: per stream the credit window plus one chunk),
// measured as the process's peak resident memory (VmHWM) over what it had
// before. Before, each connection read into 1 MiB chunks whatever its
// window, and a chunk stayed until its last frame was released, so 1000
// streams of 64 KiB windows pinned about 1000 × 256 KiB here (and without
// bound as they ran longer) against the 70 MiB planned. Both stream
// versions: version 2's 64-byte record headers and its batched grants.
func TestManyStreamsMemory(t *testing.T) {
	for _, version := range []int{StreamVersion1, StreamVersion2} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) { testManyStreamsMemory(t, version) })
	}
}

func testManyStreamsMemory(t *testing.T, version int) {
	const streams, frames, frameSize = 1000, 128, 2 << 10
	if testing.Short() {
		t.Skip("1000 connections")
	}
	if raceDetector {
		t.Skip("resident memory under the race detector is mostly its own; `make memory` runs this without it")
	}
	// As the node does (cmd/sluice raiseFileLimit): both ends of every
	// connection are in this process.
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil && lim.Cur < lim.Max {
		lim.Cur = lim.Max
		unix.Setrlimit(unix.RLIMIT_NOFILE, &lim)
	}
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) != nil || lim.Cur < 2*streams+200 {
		t.Skipf("needs %d descriptors, the hard limit is %d", 2*streams+200, lim.Max)
	}
	opts := Options{CreditWindow: 64 << 10, SocketBuffer: 256 << 10, ExpectStreams: streams}
	budget := opts.MemoryBytes()
	if want := int64(streams) * (64 + 8) << 10; budget != want {
		t.Fatalf("MemoryBytes = %s for %d streams of 64 KiB windows, want %s (window + an 8 KiB chunk each)",
			conf.ByteSize(budget), streams, conf.ByteSize(want))
	}
	runtime.GC()
	debug.FreeOSMemory()
	base := resetPeak(t)
	// The node runs with a Go memory limit of its budget less what lies
	// outside the heap; here the input is the only user.
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(base + budget + 32<<20))

	in, err := Listen("127.0.0.1:0", opts)
	if err != nil {
		t.Fatal(err)
	}
	sink := &pinSink{hold: 100 * time.Millisecond}
	stop := make(chan struct{})
	var expirer sync.WaitGroup
	expirer.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
				sink.expire(false)
			}
		}
	})
	defer func() { close(stop); expirer.Wait(); sink.expire(true) }()
	cancel, errc := transporttest.Run(t, in, sink)
	defer cancel()

	mfp := transporttest.MFP(1, frameSize)
	errs := make(chan error, streams)
	var wg sync.WaitGroup
	for range streams {
		wg.Go(func() { errs <- rawStream(in.Addr().String(), version, mfp, frames) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the input did not end after every stream ended")
	}
	peak := vmHWM(t) - base
	st := in.Stats()
	t.Logf("%d streams: peak resident +%s, planned %s; %d packets, %d pinned at most", streams, conf.ByteSize(peak), conf.ByteSize(budget), st.Packets, sink.peak)
	if v := st.ConnectionsByVersion[version]; v != streams {
		t.Fatalf("%d streams of version %d accepted (%v), want %d", v, version, st.ConnectionsByVersion, streams)
	}
	if st.Packets != streams*frames {
		t.Fatalf("%d packets delivered, %d sent (discarded %v)", st.Packets, streams*frames, st.Discarded)
	}
	// Beyond the receive buffers: 3000 goroutine stacks (reader, grants
	// and sender per stream), the sockets' and poller's structures.
	if slack := int64(48 << 20); peak > budget+slack {
		t.Fatalf("peak resident memory grew %s with %d streams, more than the %s planned + %s",
			conf.ByteSize(peak), streams, conf.ByteSize(budget), conf.ByteSize(slack))
	}
	sink.expire(true)
	if st := in.Stats(); st.HeldBytes != 0 {
		t.Fatalf("%d bytes held after every release", st.HeldBytes)
	}
}

// rawStream is a minimal sender (no write buffer of its own, unlike
// Stream's 256 KiB, which would dwarf what is measured) of stream version
// version: the preamble, n frames of mfp within the credit granted (a
// version 2 stream says it waits for credit, as Stream does), the end of
// the stream, then it waits for the receiver to close.
func rawStream(addr string, version int, mfp []byte, n int) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	w := wireV1
	if version == StreamVersion2 {
		w = wireV2
	}
	pre := make([]byte, 8, preambleV2)
	binary.LittleEndian.PutUint32(pre, tcpMagic)
	binary.LittleEndian.PutUint32(pre[4:], uint32(version))
	frame := binary.LittleEndian.AppendUint32(nil, uint32(len(mfp)))
	frame = append(frame, mfp...)
	if w == wireV2 {
		pre, frame = pre[:preambleV2], v2Frame(mfp)
	}
	if _, err := c.Write(pre); err != nil {
		return err
	}
	var g [8]byte
	avail, l, granted := int64(0), int64(len(mfp)), false // granted: the window came
	for range n {
		for avail < l {
			if w == wireV2 && granted {
				if _, err := c.Write(v2CreditWanted(int(l))); err != nil {
					return err
				}
			}
			if _, err := io.ReadFull(c, g[:]); err != nil {
				return err
			}
			avail += int64(binary.LittleEndian.Uint64(g[:]))
			granted = true
		}
		if _, err := c.Write(frame); err != nil {
			return err
		}
		avail -= l
	}
	if _, err := c.Write(make([]byte, w.header)); err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, c)
	return err
}

// resetPeak resets the process's peak resident memory to what it is now
// (clear_refs 5) and returns that.
func resetPeak(t *testing.T) int64 {
	t.Helper()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak resident memory: %v", err)
	}
	return vmHWM(t)
}

// vmHWM is the process's peak resident memory in bytes.
func vmHWM(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}
