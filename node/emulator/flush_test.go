package emulator

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/schemas"
)

// slowSender takes a millisecond per packet and counts the flushes it is
// asked for while packets are being sent.
type slowSender struct{ sent, flushes int }

func (s *slowSender) Send(context.Context, transport.Packet) error {
	time.Sleep(time.Millisecond)
	s.sent++
	return nil
}
func (s *slowSender) SendTruncated(context.Context, transport.Packet, int) error { return nil }
func (s *slowSender) Flush() error {
	if s.sent > 0 {
		s.flushes++
	}
	return nil
}
func (s *slowSender) Close(context.Context, uint64) error { return nil }
func (s *slowSender) Stats() transport.SenderStats        { return transport.SenderStats{} }

// TestPacedFlushWhenBehind: an emulator paced at a rate its sender cannot
// keep up with (never ahead of its schedule, so it never sleeps) still
// flushes the sender every flushEvery; it used to flush only before a
// sleep, leaving what a sender of many connections buffered there for as
// long as it stayed behind.
func TestPacedFlushWhenBehind(t *testing.T) {
	cfg := Config{Events: 200, Rate: 1e6, Groups: []schemas.SourceGroup{{Name: "a", Sources: []uint32{0}}}}.WithDefaults()
	out := &slowSender{}
	em := &emulator{cfg: &cfg, out: out, sum: &Summary{Faults: map[string]uint64{}, FaultFragments: map[string]uint64{}},
		rng: rand.New(rand.NewPCG(1, 2)), stalled: map[uint32]*stallQueue{}}
	if err := em.run(context.Background(), newSynthSource(&cfg), time.Now()); err != nil {
		t.Fatal(err)
	}
	// 200 packets of at least 1 ms: at least 200 ms behind, 20 intervals.
	if out.sent != 200 || out.flushes < 5 {
		t.Fatalf("%d packets sent, %d flushes while sending; want 200 and at least 5", out.sent, out.flushes)
	}
}
