package udp

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/internal/transporttest"
	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/node/transport/internal/rxbuf"
	"github.com/sluice-daq/sluice/schemas"
)

// holdSink keeps every packet's release until told to let go.
type holdSink struct {
	mu       sync.Mutex
	releases []func()
	got      chan struct{}
}

func (s *holdSink) AddPacket(_ context.Context, _ schemas.MFP, release func()) error {
	s.mu.Lock()
	s.releases = append(s.releases, release)
	s.mu.Unlock()
	s.got <- struct{}{}
	return nil
}

// With max_datagram set, datagrams are read into buffers of that size
// (plus headroom, rounded up to a power of two): a longer one is cut and
// counted truncated, and what the sink holds is counted by whole buffers,
// which MemoryBytes bounds with the reorder windows.
func TestMaxDatagramBoundsBuffers(t *testing.T) {
	o := Options{MaxDatagram: 8972, ExpectStreams: 1, ReorderWindow: 16}
	in, err := Listen("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	buf := rxbuf.ClassSize(udpHeadroom + 8972)
	if buf != 16<<10 {
		t.Fatalf("buffer of %d bytes for 8972-byte datagrams, want 16 KiB", buf)
	}
	if got, want := o.MemoryBytes(), int64(recvBatch+16)*16<<10; got != want {
		t.Errorf("MemoryBytes = %d, want %d", got, want)
	}
	if got := (&Options{}).MemoryBytes(); got != int64(recvBatch+DefaultReorderWindow)*128<<10 {
		t.Errorf("default MemoryBytes = %d, want (%d+%d) x 128 KiB", got, recvBatch, DefaultReorderWindow)
	}
	sink := &holdSink{got: make(chan struct{}, 8)}
	cancel, done := transporttest.Run(t, in, sink)
	defer cancel()
	s, err := Dial(in.Addr().String(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for seq, size := range []int{1000, 9000, 2000} { // the second is longer than max_datagram
		if err := s.Send(uint64(seq), transporttest.MFP(0, size)); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		select {
		case <-sink.got:
		case <-time.After(5 * time.Second):
			t.Fatal("datagrams not delivered")
		}
	}
	if st := in.Stats(); st.HeldBytes != int64(2*buf) || st.Discarded[transport.Truncated] != 1 {
		t.Errorf("held %d bytes, %d truncated; want %d (two whole buffers) and 1", st.HeldBytes, st.Discarded[transport.Truncated], 2*buf)
	}
	sink.mu.Lock()
	for _, r := range sink.releases {
		r()
	}
	sink.mu.Unlock()
	if st := in.Stats(); st.HeldBytes != 0 {
		t.Errorf("%d bytes held after every release", st.HeldBytes)
	}
	if err := s.End(3); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
