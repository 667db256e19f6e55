package tcp

import (
	"context"
	"io"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-daq/sluice/builder"
	"github.com/sluice-daq/sluice/internal/benchratio"
	"github.com/sluice-daq/sluice/node/internal/transporttest"
	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/schemas"
)

// BenchmarkTCPInput: 64 KiB packets from 4 sender connections of a child
// process into a TCPInput and a counting sink (releases at once, so credit
// flows back immediately), against a plain Go TCP stream of the same bytes
// over 4 connections with the same socket buffers between the same two
// processes, read into a reused 64 KiB buffer.
//
// The same on both sides: 4 MiB SO_RCVBUF set on the listener before the
// handshake and 4 MiB SO_SNDBUF, one goroutine per connection on each
// end, one write(v) per packet and reads of up to one packet (the input's
// read also takes the next record's header), so the system calls per MiB
// match (syscalls/MiB). What the input does on top is its protocol's: a
// 64-byte record header per packet, a credit grant (8 bytes) per 1/8 of the
// window read back by the sender, the sender's wait for credit when the
// window is used up, the MFP decode and the counters; the input keeps its
// chunk until the sink releases, which here is at once, so it reads into
// the same first 64 KiB of it as the baseline into its buffer. cpu_ns/B
// is both processes' CPU per byte, rx_cpu_ns/B the receiving process's.
func BenchmarkTCPInput(b *testing.B) {
	sink := transporttest.NewCountSink()
	benchTCP(b, sink, 1, func(n int) func() {
		sink.Expect(n)
		return func() { <-sink.Reached }
	})
}

// BenchmarkTCPInputBuilder is BenchmarkTCPInput with the event builder as
// the sink: each packet is one source's fragment of an event built from the
// 4 connections, copied once into an Arrow batch (whose consumer releases
// it at once). Batches of 16 events (4 MiB) closed after 1 ms: the
// defaults (256 events, 50 ms) make 64 MiB batches of these 256 KiB events.
func BenchmarkTCPInputBuilder(b *testing.B) {
	bld, err := builder.New(builder.Config{Groups: []schemas.SourceGroup{{Name: "tracker", Sources: []uint32{0, 1, 2, 3}}}, BatchEvents: 16, BatchLatency: time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for rec := range bld.Batches() {
			rec.Release()
		}
	}()
	defer func() { bld.Close(context.Background()); <-drained }()
	benchTCP(b, bld, 4, func(n int) func() {
		target := bld.Ledger().FragmentsIn + uint64(n)
		return func() {
			for bld.Ledger().FragmentsInEvents < target {
				time.Sleep(20 * time.Microsecond)
			}
		}
	})
}

// benchTCP runs the TCP input comparison with sink, perOp packets per
// operation (4: one whole event over the 4 connections); expect(n), called
// before n packets are sent, returns the func that waits until the sink
// took them.
func benchTCP(b *testing.B, sink transport.Sink, perOp int, expect func(n int) func()) {
	const sobuf = 4 << 20
	in, err := Listen("127.0.0.1:0", Options{SocketBuffer: sobuf})
	if err != nil {
		b.Fatal(err)
	}
	// The baseline's receive buffers are set as the input sets its own:
	// on the listening socket, before the handshake.
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, sobuf) })
	}}
	plain, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	var plainBytes atomic.Int64
	var plainTarget atomic.Int64
	plainReached := make(chan struct{}, 1)
	go func() {
		for {
			c, err := plain.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, benchPacket)
				for {
					n, err := io.ReadFull(c, buf)
					if err != nil {
						return
					}
					if plainBytes.Add(int64(n)) == plainTarget.Load() {
						plainReached <- struct{}{}
					}
				}
			}()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx, sink) }()
	defer func() { cancel(); <-done }()
	child := transporttest.StartChild(b, "tcp", in.Addr().String(), plain.Addr().String(), strconv.Itoa(sobuf))
	b.SetBytes(int64(perOp) * benchPacket)
	// What both processes use (rx: the receiving one, this), each side's
	// rounds summed.
	var used, rx [2]transporttest.Usage
	measured := func(side int, run func(n int)) func(n int) {
		return func(n int) {
			r0, s0 := transporttest.ProcUsage(os.Getpid()), transporttest.ProcUsage(child.Pid())
			run(n)
			r1, s1 := transporttest.ProcUsage(os.Getpid()), transporttest.ProcUsage(child.Pid())
			rx[side] = rx[side].Add(r1.Sub(r0))
			used[side] = used[side].Add(r1.Sub(r0)).Add(s1.Sub(s0))
		}
	}
	benchratio.Compare(b, measured(0, func(n int) {
		await := expect(n * perOp)
		child.Do(b, "s", n*perOp)
		await()
		child.Wait(b)
	}), measured(1, func(n int) {
		plainTarget.Store(plainBytes.Load() + int64(n*perOp)*benchPacket)
		child.Do(b, "b", n*perOp)
		<-plainReached
		child.Wait(b)
	}))
	bytes := float64(b.N) * float64(perOp) * benchPacket
	for side, prefix := range []string{"", "baseline_"} {
		b.ReportMetric(float64(used[side].CPU.Nanoseconds())/bytes, prefix+"cpu_ns/B")
		b.ReportMetric(float64(rx[side].CPU.Nanoseconds())/bytes, prefix+"rx_cpu_ns/B")
		b.ReportMetric(float64(used[side].Syscalls)/bytes*(1<<20), prefix+"syscalls/MiB")
		b.ReportMetric(float64(used[side].Switches)/bytes*(1<<20), prefix+"switches/MiB")
	}
}
