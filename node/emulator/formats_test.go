package emulator

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/transport"
)

// What the emulator cannot replay is refused before anything is sent,
// naming the file, its format and, for damaged input, the record and
// byte offset where it went wrong: a format sluice only inspects (Mark
// 5B), a BESIII file cut inside its fourth event, a VTP destination given
// a file whose records are not VDIF frames.
func TestReplayRefusals(t *testing.T) {
	b, err := os.ReadFile("../../testdata/third_party/besiii/test_raw_data.raw")
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.raw")
	if err := os.WriteFile(cut, b[:40000], 0o644); err != nil { // the fourth event's data separator is at byte 33820, the event at 33836
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg  Config
		want []string
	}{
		{Config{From: "../../testdata/third_party/baseband/sample.m5b"}, []string{"sample.m5b: mark5b is a format sluice only inspects; the emulator replays ", "besiii-raw", "cms-frd", "atlas-full-event"}},
		{Config{From: cut}, []string{"cut.raw: besiii-raw: record at byte offset 33836: truncated"}},
		{Config{From: "../../testdata/third_party/besiii/test_raw_data.raw", To: "udp://127.0.0.1:9?format=vtp"}, []string{"sends vdif records as a file holds them", "this file is besiii-raw: give a vdif file"}},
	} {
		if tc.cfg.To == "" {
			tc.cfg.To = "file://" + filepath.Join(t.TempDir(), "out")
		}
		sum, err := Run(context.Background(), tc.cfg)
		if err == nil || sum.PacketsSent != 0 {
			t.Fatalf("%s: sent %d packets, error %v", tc.cfg.From, sum.PacketsSent, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("%s: %v, want %q in it", tc.cfg.From, err, w)
			}
		}
	}
}

// A paced replay counts the file's events, not the span of its event ids:
// VDIF frames of two seconds (the next second's first frame is 2^24 event
// ids on) replayed at 100 events/s take 0.1 s, not the 46 hours the gap
// would take at that rate (the emulator paced by event id: the run hits
// the minute's deadline).
func TestPaceAcrossGaps(t *testing.T) {
	b, err := os.ReadFile("../../testdata/third_party/baseband/sample_mwa.vdif")
	if err != nil {
		t.Fatal(err)
	}
	const frame = 544 // 10 frames of one thread
	if len(b) != 10*frame {
		t.Fatalf("%d bytes", len(b))
	}
	le := binary.LittleEndian
	for k := 5; k < 10; k++ { // frames 5-9: frames 0-4 of the next second
		w0, w1 := le.Uint32(b[k*frame:]), le.Uint32(b[k*frame+4:])
		le.PutUint32(b[k*frame:], w0&^(1<<30-1)|(w0&(1<<30-1)+1))
		le.PutUint32(b[k*frame+4:], w1&^(1<<24-1)|uint32(k-5))
	}
	two := filepath.Join(t.TempDir(), "two-seconds.vdif")
	if err := os.WriteFile(two, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sum, err := Run(ctx, Config{From: two, To: "file://" + filepath.Join(t.TempDir(), "out"), Rate: 100})
	if err != nil || sum.PacketsSent != 10 {
		t.Fatalf("sent %d packets: %v", sum.PacketsSent, err)
	}
}

// A paced run that is stopped returns at once rather than sleeping until
// its next packet is due (here 100 s away; the old emulator slept it out).
func TestCancelWhilePaced(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, Config{Events: 3, Rate: 0.01, To: "file://" + filepath.Join(t.TempDir(), "out")})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run still sleeping 30 s after it was stopped")
	}
}

// Packed 10 events a packet, the LHCb sample's two passes pace as events
// 0 and 10: a pass is the file's events, not its packets' first events.
func TestPacePacked(t *testing.T) {
	f, _, err := loadFile(sampleMDF, 10, 2, "file://x", transport.PayloadMFP)
	if err != nil {
		t.Fatal(err)
	}
	paces := map[uint64]int{}
	for {
		p, ok := f.next(nil)
		if !ok {
			break
		}
		paces[p.pace]++
	}
	if len(paces) != 2 || paces[0] == 0 || paces[0] != paces[10] {
		t.Fatalf("packets by pace %v, want as many at 0 as at 10", paces)
	}
}
