package tcp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"unsafe"

	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/node/internal/transporttest"
	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/schemas"
)

// holdSink checks every packet against the one sent and holds every third
// one until hold more are held, then releases the oldest after checking its
// bytes again: a frame handed on must stay intact while the receiver moves
// and reuses its chunks.
type holdSink struct {
	want  [][]byte
	hold  int
	align int // every packet must start at a multiple of this in memory

	mu   sync.Mutex
	next int
	held []heldFrame
	errs []string
}

type heldFrame struct {
	i       int
	p       []byte
	release func()
}

func (s *holdSink) AddPacket(_ context.Context, p schemas.MFP, release func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.next
	s.next++
	if i >= len(s.want) || !bytes.Equal(p.Bytes(), s.want[i]) {
		s.errs = append(s.errs, fmt.Sprintf("packet %d: %d bytes differ from those sent", i, len(p.Bytes())))
	}
	if a := uintptr(unsafe.Pointer(unsafe.SliceData(p.Bytes()))); s.align > 1 && a%uintptr(s.align) != 0 {
		s.errs = append(s.errs, fmt.Sprintf("packet %d of %d bytes at address %#x, not a multiple of %d", i, len(p.Bytes()), a, s.align))
	}
	if i%3 != 0 {
		release()
		return nil
	}
	s.held = append(s.held, heldFrame{i, p.Bytes(), release})
	if len(s.held) > s.hold {
		s.releaseOldest()
	}
	return nil
}

// releaseOldest checks and releases the oldest held packet; s.mu is held.
func (s *holdSink) releaseOldest() {
	h := s.held[0]
	s.held = s.held[1:]
	if !bytes.Equal(h.p, s.want[h.i]) {
		s.errs = append(s.errs, fmt.Sprintf("held packet %d changed before its release", h.i))
	}
	h.release()
}

// TestTCPMixedSizesHeldFramesIntact sends frames from 40 bytes to larger
// than a receive chunk over one connection to a sink that holds some of
// them: every frame must arrive whole, in order, and stay unchanged until
// released, through the reader's tail moves, chunk changes and bounded
// reads; all credit must come back. With the default window (1 MiB
// chunks) and a small one (32 KiB chunks, where held frames pin chunks
// that count against the window), from a version 1 and a version 2
// sender; version 2's frames must be handed on at addresses that are
// multiples of 64, as they are in the stream.
func TestTCPMixedSizesHeldFramesIntact(t *testing.T) {
	for _, version := range []int{StreamVersion1, StreamVersion2} {
		for _, window := range []int64{8 << 20, 256 << 10} {
			t.Run(fmt.Sprintf("v%d/%s", version, conf.ByteSize(window)), func(t *testing.T) { testMixedSizes(t, version, window) })
		}
	}
}

func testMixedSizes(t *testing.T, version int, window int64) {
	sz := chunkSizesFor(window)
	sizes := []int{40, 3000, sz.chunk * 7 / 10, sz.chunk * 65 / 100, 200, sz.chunk + 12345, 5000, sz.minRead, 17}
	var want [][]byte
	for i := range 120 {
		n := sizes[i%len(sizes)]
		payload := make([]byte, max(n-schemas.MFPHeaderSize-8, 1))
		for j := range payload {
			payload[j] = byte(i*31 + j*7)
		}
		p := schemas.AppendMFP(nil, 7, uint64(i), 0, 0, [][]byte{payload}, nil)
		want = append(want, p)
	}
	in, err := Listen("127.0.0.1:0", Options{CreditWindow: conf.ByteSize(window), ExpectStreams: 1})
	if err != nil {
		t.Fatal(err)
	}
	sink := &holdSink{want: want, hold: 3}
	if version == StreamVersion2 {
		sink.align = wireAlign
	}
	_, errc := transporttest.Run(t, in, sink)
	ctx := context.Background()
	s, err := DialVersion(ctx, in.Addr().String(), 0, version)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range want {
		if err := s.Send(ctx, p); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	for len(sink.held) > 0 {
		sink.releaseOldest()
	}
	defer sink.mu.Unlock()
	for _, e := range sink.errs {
		t.Error(e)
	}
	if sink.next != len(want) {
		t.Fatalf("received %d packets, want %d", sink.next, len(want))
	}
	st := in.Stats()
	if st.HeldBytes != 0 {
		t.Fatalf("HeldBytes = %d after every release, want 0", st.HeldBytes)
	}
	for r, n := range st.Discarded {
		if n != 0 {
			t.Errorf("discarded %d for %v, want none", n, r)
		}
	}
}

// The TCP receiver enforces the protocol: a wrong preamble and a frame
// beyond the granted credit are counted and the connection closed.
func TestTCPProtocolViolations(t *testing.T) {
	in, err := Listen("127.0.0.1:0", Options{CreditWindow: 1024})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- in.Run(ctx, transporttest.NewCheckSink(0)) }()
	defer func() { cancel(); <-errc }()
	s, err := Dial(ctx, in.Addr().String(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ctx, make([]byte, 2000)); !errors.Is(err, transport.ErrPacketTooLarge) {
		t.Fatalf("2000-byte packet with a 1024-byte window: %v", err)
	}
	// Bypass the sender's credit check: the receiver must catch it.
	var h [4]byte
	binary.LittleEndian.PutUint32(h[:], 2000)
	s.conn.Write(h[:])
	s.conn.Write(make([]byte, 2000))
	<-s.closed
	raw, err := Dial(ctx, in.Addr().String(), 0)
	if err != nil {
		t.Fatal(err)
	}
	raw.conn.Close()
	c, err := net.Dial("tcp", in.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	io.ReadAll(c)
	c.Close()
	if got := in.Stats().Discarded[transport.Protocol]; got != 2 {
		t.Fatalf("protocol violations counted %d, want 2", got)
	}
}
