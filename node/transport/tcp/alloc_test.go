package tcp

import (
	"context"
	"testing"

	"github.com/sluice-daq/sluice/node/internal/transporttest"
)

// TestLargeFramesAllocateNothing: a 64 KiB frame sent (Stream.Send, by
// writev) and received (the input hands it on as a view of its chunk and
// takes a reused release handle) allocates nothing in steady state, both
// ends being in this process. Before, the sender allocated its header and
// writev vector per frame and the input a release closure.
func TestLargeFramesAllocateNothing(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector makes sync.Pool drop what it is given")
	}
	in, err := Listen("127.0.0.1:0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	sink := transporttest.NewCountSink()
	cancel, errc := transporttest.Run(t, in, sink)
	defer func() { cancel(); <-errc }()
	ctx := context.Background()
	s, err := Dial(ctx, in.Addr().String(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	p := transporttest.MFP(0, 64<<10)
	send := func() {
		sink.Expect(1)
		if err := s.Send(ctx, p); err != nil {
			t.Fatal(err)
		}
		<-sink.Reached
	}
	for range 300 { // past the first chunks, grants and pool fills
		send()
	}
	if n := testing.AllocsPerRun(500, send); n > 0 {
		t.Fatalf("%.2f allocations per 64 KiB frame sent and received, want 0", n)
	}
}
