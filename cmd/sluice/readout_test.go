package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/config"
	"github.com/sluice-daq/sluice/node/emulator"
	"github.com/sluice-daq/sluice/node/peer"
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

// A bad flag or --to is a configuration error (exit 3, as sluice run's),
// found before anything is sent.
func TestReadoutBadToExitsConfig(t *testing.T) {
	for _, args := range [][]string{
		{"readout"},
		{"readout", "--to", "ftp://x"},
		{"readout", "--to", "peer://127.0.0.1"},
		{"readout", "--to", "peer://127.0.0.1:0"},
		{"readout", "--to", "peer://127.0.0.1:9?transport=carrier-pigeon"},
		{"readout", "--to", "tcp://nohost"},
		{"readout", "--to", "peer://127.0.0.1:9", "--set", "send_ring=1KiB"},
		{"readout", "--to", "file:///dev/null", "--drop", "1.5"},
		{"readout", "--to", "file:///dev/null", "--config", "/nonexistent/node.yaml"},
	} {
		out, err := run(t, args...)
		if c := exitCode(err); c != exitConfig {
			t.Errorf("%v: exit %d (%v), want %d", args, c, err, exitConfig)
		}
		if strings.Contains(out, "sent ") {
			t.Errorf("%v: printed a summary %q", args, out)
		}
	}
}

// A readout that fails (nothing listens at --to) says so, exits 1 and
// prints no summary as if it had sent; the peer sender does not wait for
// a receiver unless told to (connect_wait).
func TestReadoutFailurePrintsError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	t0 := time.Now()
	out, err := run(t, "readout", "--to", "peer://"+addr+"?transport=tcp", "--events", "10")
	if err == nil || exitCode(err) != 1 {
		t.Fatalf("exit %d (%v), want 1", exitCode(err), err)
	}
	if !errors.Is(err, peer.ErrUnreachable) || !strings.Contains(err.Error(), addr) {
		t.Errorf("error %q does not say the connection to %s was refused", err, addr)
	}
	if strings.Contains(out, "sent ") {
		t.Errorf("printed a summary %q after failing", out)
	}
	if d := time.Since(t0); d > 3*time.Second {
		t.Errorf("took %v to fail against a closed port", d)
	}
}

// Started without settings, a readout sends every source the default node
// configuration expects, so none of its events is incomplete; --config
// takes the sources of a node's configuration.
func TestReadoutSourcesAgreeWithNode(t *testing.T) {
	idsOf := func(gs []schemas.SourceGroup) map[uint32]bool {
		m := map[uint32]bool{}
		for _, g := range gs {
			for _, id := range g.Sources {
				m[id] = true
			}
		}
		return m
	}
	def, err := config.Default().Groups()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	node := filepath.Join(dir, "node.yaml")
	if err := os.WriteFile(node, []byte("inputs: [{uri: \"tcp://127.0.0.1:0\"}]\nsources: [{name: ecal, sources: \"3-5\"}, {name: muon, sources: \"40\"}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want map[uint32]bool
	}{
		{nil, idsOf(def)},
		{[]string{"--config", node}, map[uint32]bool{3: true, 4: true, 5: true, 40: true}},
	} {
		out := filepath.Join(dir, "run.mfp")
		if _, err := run(t, append([]string{"readout", "--to", "file://" + out, "--events", "3"}, c.args...)...); err != nil {
			t.Fatal(err)
		}
		got := map[uint32]bool{}
		sink := sourceSink(got)
		if err := file.NewInput(out).Run(context.Background(), sink); err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got, c.want) {
			t.Errorf("%v: sent sources %v, want %v", c.args, got, c.want)
		}
		os.Remove(out)
	}
}

// sourceSink records the source ids of the fragments read back.
type sourceSink map[uint32]bool

func (s sourceSink) AddPacket(_ context.Context, p schemas.MFP, release func()) error {
	s[p.SourceID] = true
	release()
	return nil
}

// TestBadEDV0File: a VDIF file whose EDV 0 headers carry a non-zero word
// 5 is reported with the VDIF decoder's error, by inspect and by readout
// --from, not as "no known format"; readout prints no "sent 0 packets"
// before it.
func TestBadEDV0File(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "third_party", "baseband", "sample_mwa.vdif"))
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(b); off += 544 {
		binary.LittleEndian.PutUint32(b[off+20:], 1)
	}
	p := filepath.Join(t.TempDir(), "bad.vdif")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	const want = "looks like vdif, but: vdif: word 5 at byte offset 20: inconsistent: EDV 0 requires extended user data 0"
	if _, err := run(t, "inspect", p); err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "no known format") {
		t.Fatalf("inspect: %v", err)
	}
	out, err := run(t, "readout", "--from", p, "--to", "file://"+filepath.Join(t.TempDir(), "x.mfp"))
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("readout --from: %v", err)
	}
	if strings.Contains(out, "sent 0 packets") {
		t.Fatalf("readout printed a summary before its error:\n%s", out)
	}
}

// A sender setting given as a flag is named as that flag in the error
// about its value, not as the --set key it stands for.
func TestReadoutNamesTheFlagGiven(t *testing.T) {
	for _, c := range []struct {
		args      []string
		want, not string
	}{
		{[]string{"--stream-version", "3"}, "--stream-version", "--set stream_version"},
		{[]string{"--set", "stream_version=3"}, "--set stream_version", "--stream-version"},
	} {
		_, err := run(t, append([]string{"readout", "--to", "tcp://127.0.0.1:9"}, c.args...)...)
		if exitCode(err) != exitConfig || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), c.not) {
			t.Errorf("%v: exit %d, error %v: want exit %d naming %s", c.args, exitCode(err), err, exitConfig, c.want)
		}
	}
}
