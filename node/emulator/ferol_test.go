package emulator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/internal/transporttest"
	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/node/transport/tcp"
)

const sampleFEROL = "../../testdata/third_party/cms/mol_run55.dat.gz"

// runTCP replays cfg into a TCP input listening with framing and returns
// what the emulator sent, the input's counters and what its sink saw.
func runTCP(t *testing.T, framing string, cfg Config) (Summary, transport.Stats, transporttest.CheckCounts) {
	t.Helper()
	in, err := tcp.Listen("127.0.0.1:0", tcp.Options{Framing: framing, ExpectStreams: 1})
	if err != nil {
		t.Fatal(err)
	}
	sink := transporttest.NewCheckSink(0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx, sink) }()
	cfg.To = "tcp://" + in.ListenAddr()
	if framing != "" {
		cfg.To += "?framing=" + framing
	}
	sum, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return sum, in.Stats(), sink.Counts()
}

// A real FEROL capture replayed with ?framing=ferol goes out as the FEROL
// sent it: the input gets its 300 FED fragments; the corrupt fault flips a
// byte the FED's CRC-16 covers, and the input flags exactly those; dropped
// fragments are missing, duplicated ones come twice.
func TestReplayFEROLFraming(t *testing.T) {
	cfg := Config{From: sampleFEROL, Seed: 3, Faults: Faults{Corrupt: 0.1, Drop: 0.05, Duplicate: 0.05}}
	sum, st, got := runTCP(t, tcp.FramingFEROL, cfg)
	if sum.Mode != "file:ferol" || sum.PacketsGenerated != 300 || sum.BytesSent == 0 {
		t.Fatalf("summary %+v", sum)
	}
	c, d, x := sum.Faults[FaultCorrupt], sum.Faults[FaultDrop], sum.Faults[FaultDuplicate]
	if c == 0 || d == 0 || x == 0 {
		t.Fatalf("faults %+v: want some of each", sum.Faults)
	}
	if st.Packets != 300-d+x || st.Flagged[tcp.FlagFEDCRC] != c || st.Streams != 1 || st.DiscardTotal() != 0 {
		t.Fatalf("input %+v after %+v", st, sum)
	}
	if got.Unique != 300-d || got.Dups != x || got.BadCRC != 0 {
		t.Fatalf("sink %+v after %+v", got, sum)
	}
}

// Without ?framing=ferol the capture's FED fragments go as sluice MFPs,
// one per fragment: the same 300 (FED, event) fragments.
func TestReplayFEROLAsMFPs(t *testing.T) {
	sum, st, got := runTCP(t, "", Config{From: sampleFEROL, Loop: 2})
	if sum.Mode != "file:ferol" || sum.PacketsSent != 600 || st.Packets != 600 || got.Unique != 600 || got.Dups != 0 {
		t.Fatalf("summary %+v, input %+v, sink %+v", sum, st, got)
	}
}

// What a FEROL framing cannot carry is refused before anything is sent.
func TestFEROLFramingRefusals(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Events: 10}, "give a FEROL capture with --from"},
		{Config{From: sampleMDF}, "?framing=ferol sends ferol records as a file holds them, one per packet; this file is lhcb-mdf: give a cms-ferol file"},
		{Config{From: sampleFEROL, Loop: 2}, "--loop must be 1"},
	} {
		tc.cfg.To = "tcp://127.0.0.1:9?framing=ferol"
		if _, err := Run(context.Background(), tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
