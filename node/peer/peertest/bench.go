package peertest

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/internal/transporttest"
	"github.com/sluice-daq/sluice/node/peer"
)

// Benchmark support: a sink process (the test binary run again, role
// "sink") that takes data and control messages from this process over a
// peer transport, and plain framed TCP over one connection as the pure-Go
// baseline, so both travel between the same two processes.

// benchQueue is the benchmarks' Config.SendQueue.
const benchQueue = 256

// Control types of the benchmark protocol.
const (
	typeSync uint16 = 0xFFF0 // body: u64 data messages sent so far; answered once they all arrived
	typePing uint16 = 0xFFF1 // answered at once
)

// plainSync is the plain-TCP frame length that asks for an acknowledgement.
const plainSync = 0xFFFFFFFF

func sink(ctx context.Context, c peer.Conn) error {
	var got, want uint64
	waiting := false
	for {
		m, err := c.Recv(ctx)
		if err != nil {
			return err
		}
		switch {
		case m.Kind == peer.KindData:
			m.Data.Release()
			got++
		case m.Type == typePing:
			if err := c.SendControl(ctx, typePing, nil); err != nil {
				return err
			}
		case m.Type == typeSync:
			want, waiting = binary.LittleEndian.Uint64(m.Body), true
		}
		if waiting && got >= want {
			waiting = false
			if err := c.SendControl(ctx, typeSync, nil); err != nil {
				return err
			}
		}
	}
}

func plainSink(addr string) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "peertest plain sink:", err)
		return
	}
	tc := nc.(*net.TCPConn)
	tc.SetReadBuffer(4 << 20)
	tc.SetWriteBuffer(4 << 20)
	buf := make([]byte, 64<<20) // reused, as the pool's slots are
	var hb [4]byte
	for {
		if _, err := io.ReadFull(tc, hb[:]); err != nil {
			return
		}
		n := binary.LittleEndian.Uint32(hb[:])
		if n == plainSync {
			if _, err := tc.Write([]byte{1}); err != nil {
				return
			}
			continue
		}
		if _, err := io.ReadFull(tc, buf[:n]); err != nil {
			return
		}
	}
}

// Bench is this process's side of a benchmark: a transport and a Conn to
// the sink process (and the plain TCP connection to it, if asked for).
type Bench struct {
	T      peer.Transport
	C      peer.Conn
	Plain  *net.TCPConn
	child  *child
	ctx    context.Context
	sent   uint64
	r      peer.Region
	size   int
	pieces int
	free   chan int
	failed atomic.Pointer[error] // the first send that completed with an error
}

// StartBench opens a transport of f's kind, starts the sink process with
// env (e.g. UCX_TLS=...) and accepts its Conn; with plain it also accepts
// the sink's plain TCP connection. maxSize is the largest message to send.
func StartBench(b *testing.B, f Factory, maxSize int, plain bool, env ...string) *Bench {
	b.Helper()
	cfg := Config("bench")
	cfg.MaxData = max(cfg.MaxData, maxSize)
	// Benchmarks measure throughput, not failure detection: a machine
	// loaded enough to starve a process for half a second must not end
	// the run.
	cfg.PeerTimeout = 10 * time.Second
	// As many messages in flight as ucx_perftest keeps (its window is
	// UCX's): a rendezvous costs a round trip, and on a loaded machine
	// round trips are long.
	cfg.SendQueue = benchQueue
	tr := f.open(b, cfg)
	var ln *net.TCPListener
	if plain {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		ln = l.(*net.TCPListener)
		env = append(env, envPlain+"="+ln.Addr().String())
	}
	ch := startHelper(b, "sink", "sink", tr.Addr(), 0, env...)
	ctx := context.Background()
	c, err := tr.Accept(ctx)
	if err != nil {
		b.Fatal(err)
	}
	// Pieces of the send region: enough for the default SendQueue of
	// small messages in flight, 64 MiB at most.
	pieces := max(8, min(benchQueue, (64<<20)/maxSize))
	bn := &Bench{T: tr, C: c, child: ch, ctx: ctx, size: maxSize, pieces: pieces, free: make(chan int, pieces)}
	if plain {
		ln.SetDeadline(time.Now().Add(20 * time.Second))
		pc, err := ln.AcceptTCP()
		ln.Close()
		if err != nil {
			b.Fatal(err)
		}
		pc.SetReadBuffer(4 << 20)
		pc.SetWriteBuffer(4 << 20)
		bn.Plain = pc
	}
	if bn.r, err = tr.AllocRegion(pieces * maxSize); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < pieces; i++ {
		fill(bn.r.Bytes()[i*maxSize:(i+1)*maxSize], uint64(i))
		bn.free <- i
	}
	b.Cleanup(bn.close)
	return bn
}

func (bn *Bench) close() {
	// Closing the Conn first fails what is still in flight.
	bn.C.Close()
	for i := 0; i < bn.pieces; i++ {
		select {
		case <-bn.free:
		case <-time.After(10 * time.Second):
			panic("peertest: sends still in flight 10s after their Conn was closed")
		}
	}
	bn.r.Close()
	if bn.Plain != nil {
		bn.Plain.Close()
	}
	bn.C.Close()
	bn.T.Close()
	bn.child.kill()
}

// Data sends n data messages of size bytes (from rotating pieces of a
// region) and waits until the sink has them all.
func (bn *Bench) Data(b *testing.B, n, size int) {
	for i := 0; i < n; i++ {
		k := <-bn.free
		err := bn.C.SendData(bn.ctx, nil, bn.r.Slice(k*bn.size, size), func(err error) {
			if err != nil {
				bn.failed.CompareAndSwap(nil, &err)
			}
			bn.free <- k
		})
		if err != nil {
			bn.free <- k
			b.Fatal(err)
		}
		if e := bn.failed.Load(); e != nil {
			b.Fatal(*e)
		}
	}
	bn.sent += uint64(n)
	bn.sync(b)
}

// Control sends n control messages of size bytes and waits until the sink
// has them.
func (bn *Bench) Control(b *testing.B, n, size int) {
	body := make([]byte, size)
	for i := 0; i < n; i++ {
		if err := bn.C.SendControl(bn.ctx, 1, body); err != nil {
			b.Fatal(err)
		}
	}
	bn.sync(b)
}

// PingPong makes n round trips of an empty control message.
func (bn *Bench) PingPong(b *testing.B, n int) {
	for i := 0; i < n; i++ {
		if err := bn.C.SendControl(bn.ctx, typePing, nil); err != nil {
			b.Fatal(err)
		}
		if m, err := bn.C.Recv(bn.ctx); err != nil || m.Type != typePing {
			b.Fatalf("pong: %v %v", m.Type, err)
		}
	}
}

func (bn *Bench) sync(b *testing.B) {
	if err := bn.C.SendControl(bn.ctx, typeSync, binary.LittleEndian.AppendUint64(nil, bn.sent)); err != nil {
		b.Fatal(err)
	}
	if m, err := bn.C.Recv(bn.ctx); err != nil || m.Type != typeSync {
		b.Fatalf("sync: %v %v", m.Type, err)
	}
}

// PlainData writes n frames of size bytes (a 4-byte length, then the
// payload from the same region, by writev) on the plain connection and
// waits for the sink's acknowledgement.
func (bn *Bench) PlainData(b *testing.B, n, size int) {
	var hb [4]byte
	binary.LittleEndian.PutUint32(hb[:], uint32(size))
	mem := bn.r.Bytes()
	for i := 0; i < n; i++ {
		k := i % bn.pieces
		bufs := net.Buffers{hb[:], mem[k*bn.size : k*bn.size+size]}
		if _, err := bufs.WriteTo(bn.Plain); err != nil {
			b.Fatal(err)
		}
	}
	binary.LittleEndian.PutUint32(hb[:], plainSync)
	if _, err := bn.Plain.Write(hb[:]); err != nil {
		b.Fatal(err)
	}
	var ack [1]byte
	if _, err := io.ReadFull(bn.Plain, ack[:]); err != nil {
		b.Fatal(err)
	}
}

// CPU is the CPU time used so far by this process and the sink process.
func (bn *Bench) CPU() time.Duration {
	return transporttest.SelfCPU() + transporttest.ProcCPU(bn.child.cmd.Process.Pid)
}
