package emulator

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
