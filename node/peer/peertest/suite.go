package peertest

import (
	"context"
	"encoding/binary"
	"testing"
	"time"
	"unsafe"

	"github.com/sluice-daq/sluice/node/peer"
)

func hdr(i uint64) []byte { return binary.LittleEndian.AppendUint64(nil, i) }

func seqOf(t testing.TB, b []byte) uint64 {
	t.Helper()
	if len(b) != 8 {
		t.Fatalf("header/body of %d bytes, want 8", len(b))
	}
	return binary.LittleEndian.Uint64(b)
}

// fill writes a pattern that depends on seq and the position.
func fill(b []byte, seq uint64) {
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], seq<<40^uint64(i))
	}
	for i := len(b) &^ 7; i < len(b); i++ {
		b[i] = byte(seq + uint64(i))
	}
}

func checkFill(t testing.TB, b []byte, seq uint64) {
	t.Helper()
	for i := 0; i+8 <= len(b); i += 8 {
		if got := binary.LittleEndian.Uint64(b[i:]); got != seq<<40^uint64(i) {
			t.Fatalf("message %d: bytes at %d are %x, want %x", seq, i, got, seq<<40^uint64(i))
		}
	}
	for i := len(b) &^ 7; i < len(b); i++ {
		if b[i] != byte(seq+uint64(i)) {
			t.Fatalf("message %d: byte %d is %x", seq, i, b[i])
		}
	}
}

// checkInPool fails unless b lies inside the transport's receive pool at a
// page-aligned slot: the payload was received where it is read.
func checkInPool(t testing.TB, tr peer.Transport, b []byte) {
	t.Helper()
	pm, ok := tr.(PoolMemory)
	if !ok {
		t.Fatalf("transport %T does not expose its pool memory", tr)
	}
	mem := pm.PoolMemory()
	if len(b) == 0 {
		return
	}
	base, p := uintptr(unsafe.Pointer(&mem[0])), uintptr(unsafe.Pointer(&b[0]))
	if p < base || p+uintptr(len(b)) > base+uintptr(len(mem)) {
		t.Fatalf("payload at %#x is outside the receive pool [%#x, %#x)", p, base, base+uintptr(len(mem)))
	}
	if (p-base)%4096 != 0 {
		t.Fatalf("payload at pool offset %d, not at a slot start", p-base)
	}
}

// slots hands out fixed-size pieces of a region, each reusable once the
// send from it completed.
type slots struct {
	r    peer.Region
	size int
	free chan int
	errs chan error
}

func newSlots(t testing.TB, tr peer.Transport, n, size int) *slots {
	t.Helper()
	r, err := tr.AllocRegion(n * size)
	if err != nil {
		t.Fatal(err)
	}
	s := &slots{r: r, size: size, free: make(chan int, n), errs: make(chan error, 1)}
	for i := 0; i < n; i++ {
		s.free <- i
	}
	return s
}

// send sends n bytes filled for seq from a free piece.
func (s *slots) send(ctx context.Context, c peer.Conn, seq uint64, n int) error {
	i := <-s.free
	sl := s.r.Slice(i*s.size, n)
	fill(sl.Bytes(), seq)
	err := c.SendData(ctx, hdr(seq), sl, func(err error) {
		if err != nil {
			select {
			case s.errs <- err:
			default:
			}
		}
		s.free <- i
	})
	if err != nil {
		s.free <- i
	}
	return err
}

// wait waits until every piece is free again and closes the region.
func (s *slots) close(t testing.TB) {
	t.Helper()
	for i := 0; i < cap(s.free); i++ {
		select {
		case j := <-s.free:
			defer func() { s.free <- j }()
		case <-time.After(10 * time.Second):
			t.Fatalf("sends from the region still in flight after 10s")
		}
	}
	if err := s.r.Close(); err != nil {
		t.Fatal(err)
	}
}
