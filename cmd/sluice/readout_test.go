package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-daq/sluice/node/emulator"
	"github.com/sluice-daq/sluice/node/transport/file"
	"github.com/sluice-daq/sluice/schemas"
)

// countSink counts the packets and fragments read back.
type countSink struct{ packets, fragments int }

func (s *countSink) AddPacket(_ context.Context, p schemas.MFP, release func()) error {
	s.packets++
	s.fragments += p.N
	release()
	return nil
}

func TestReadoutToFile(t *testing.T) {
	dir := t.TempDir()
	out, js := filepath.Join(dir, "run.mfp"), filepath.Join(dir, "summary.json")
	stdout, err := run(t, "readout", "--to", "file://"+out, "--events", "50", "--groups", "ecal:0-3,muon:4-5",
		"--packing", "2", "--size-dist", "uniform:64,256", "--duplicate", "0.2", "--drop", "0.1", "--seed", "3", "--summary-json", js)
	if err != nil {
		t.Fatal(err)
	}
	var sum emulator.Summary
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	// 50 events in packets of 2, for 6 sources.
	if sum.PacketsGenerated != 150 || sum.FragmentsGenerated != 300 || sum.Sources != 6 || sum.Faults["duplicate"] == 0 || sum.Faults["drop"] == 0 {
		t.Fatalf("summary %+v", sum)
	}
	if sum.PacketsSent != sum.PacketsGenerated-sum.Faults["drop"]+sum.Faults["duplicate"] {
		t.Fatalf("summary does not add up: %+v", sum)
	}
	if !strings.Contains(stdout, "sent ") || !strings.Contains(stdout, "duplicate ") {
		t.Fatalf("output %q does not say what was sent and injected", stdout)
	}
	sink := &countSink{}
	if err := file.NewInput(out).Run(context.Background(), sink); err != nil {
		t.Fatal(err)
	}
	if uint64(sink.packets) != sum.PacketsSent || uint64(sink.fragments) != sum.FragmentsSent {
		t.Fatalf("file holds %d packets / %d fragments, summary says %d / %d", sink.packets, sink.fragments, sum.PacketsSent, sum.FragmentsSent)
	}
}

func TestReadoutRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"readout"},
		{"readout", "--to", "ftp://x"},
		{"readout", "--to", "file:///dev/null", "--size-dist", "normal:3"},
		{"readout", "--to", "file:///dev/null", "--groups", "0-3"},
		{"readout", "--to", "file:///dev/null", "--drop", "1.5"},
	} {
		if _, err := run(t, args...); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
