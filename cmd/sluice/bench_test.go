package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-daq/sluice/node"
)

// TestBenchSmall runs `sluice bench --json` on a few events with the real
// passthrough plugin (built here) and checks the figures it reports hang
// together; performance itself is measured by running it, not by tests.
func TestBenchSmall(t *testing.T) {
	dir := t.TempDir()
	plugin := filepath.Join(dir, "passthrough")
	build := exec.Command("go", "build", "-o", plugin, "../../plugins/examples/passthrough")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatal(err)
	}
	// 320MiB: this test binary's mapped pages (85MiB under the race
	// detector) put the least budget above the default 256MiB.
	out, err := run(t, "bench", "--events", "400", "--sources", "10", "--event-bytes", "20000", "--packing", "2",
		"--accept", "0.25", "--plugin", plugin, "--memory-budget", "320MiB", "--json", "--memprofile", filepath.Join(dir, "allocs.pprof"))
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	// A pprof profile is gzipped protocol buffers.
	if b, err := os.ReadFile(filepath.Join(dir, "allocs.pprof")); err != nil || len(b) < 100 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("--memprofile wrote %d bytes (%v), not a gzipped profile", len(b), err)
	}
	var r benchResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !r.Balanced || r.Events != 400 || r.Accepted != 100 || r.Stored != 100 || r.EventsPerSecond <= 0 ||
		r.GBPerSecond <= 0 || r.MemcpyGBPerSec <= 0 || r.Ratio <= 0 || r.PeakRSSBytes == 0 || r.BudgetBytes != 320<<20 || r.BatchesRelieved != 0 ||
		r.SampleEvents != 400 || r.InputLosses+r.FragmentsDiscarded+r.EventsIncomplete+r.EventsCorrupt != 0 ||
		r.Packing != 2 || r.RingBytes != 16<<20 || r.Accept != 0.25 || r.Instances != 1 {
		t.Fatalf("bench result %+v", r)
	}
	// One pass of the loop, every byte copied: the packets with their
	// headers, more than the payload.
	if r.EmulatorBytesPlaced != 0 || r.EmulatorBytesSent <= 400*20000 || r.EmulatorBytesSent > 400*20000*11/10 {
		t.Fatalf("emulator sent %d bytes, %d of them in place; want all %d+ copied", r.EmulatorBytesSent, r.EmulatorBytesPlaced, 400*20000)
	}
	// The rates are over the data's flow, which lies inside the run.
	if r.Seconds <= 0 || r.RunSeconds < r.Seconds || r.StartupSeconds <= 0 {
		t.Fatalf("flow %.3f s, run %.3f s, start-up %.3f s: want 0 < flow <= run, start-up > 0", r.Seconds, r.RunSeconds, r.StartupSeconds)
	}
	if want := 400 * 20000 / r.Seconds / 1e9; r.GBPerSecond < 0.999*want || r.GBPerSecond > 1.001*want {
		t.Fatalf("%.4f GB/s, want the bytes over the flow: %.4f", r.GBPerSecond, want)
	}
	lat := map[string]node.LatencyStatus{}
	for _, s := range r.Latency {
		lat[s.Name] = s
	}
	if s := lat["end_to_end_stored"]; s.Count != r.Stored || s.P50 <= 0 || s.P99 < s.P50 {
		t.Fatalf("end-to-end latency of the stored events %+v (stored %d)", s, r.Stored)
	}
	if s := lat["event_build"]; s.Count != r.Events || s.P99 <= 0 {
		t.Fatalf("event building latency %+v (events %d)", s, r.Events)
	}
	// A 1MiB ring holds fewer packets than a batch of these events: the
	// builder closes batches early to free it, and bench reports how many
	// (in the JSON and in the text). One lap of it holds 51 of these
	// events (25 blocks of 10 packets of 4096 ring bytes make 50), the loop
	// replayed 40 times: the packets' bytes are written once and their
	// headers every pass (shm.Writer.WritePlaced), and the builder's
	// CRC-32C check of every fragment finds them all intact.
	out, err = run(t, "bench", "--events", "2000", "--sources", "10", "--event-bytes", "20000", "--packing", "2",
		"--accept", "0.25", "--plugin", plugin, "--memory-budget", "320MiB", "--ring-size", "1MiB", "--json")
	if err != nil {
		t.Fatalf("bench --ring-size 1MiB: %v\n%s", err, out)
	}
	r = benchResult{}
	if err := json.Unmarshal([]byte(out), &r); err != nil || !strings.Contains(out, `"batches_relieved"`) {
		t.Fatalf("%v\n%s", err, out)
	}
	if !r.Balanced || r.Stored != 500 || r.BatchesRelieved == 0 || r.SampleEvents != 50 || r.InputLosses+r.FragmentsDiscarded+r.EventsIncomplete+r.EventsCorrupt != 0 {
		t.Fatalf("bench --ring-size 1MiB: %+v", r)
	}
	// 40 passes of 25 blocks of 10 packets of 4048 bytes (4096 of ring):
	// the first copied whole, the 39 others all but their 32-byte MFP
	// headers in place.
	if want := uint64(39 * 250 * (4048 - 32)); r.EmulatorBytesSent != 40*250*4048 || r.EmulatorBytesPlaced != want {
		t.Fatalf("emulator sent %d bytes, %d of them in place; want %d, %d", r.EmulatorBytesSent, r.EmulatorBytesPlaced, 40*250*4048, want)
	}
	var text strings.Builder
	printBench(&text, r)
	for _, want := range []string{fmt.Sprintf("batches relieved    %8d", r.BatchesRelieved),
		"50 events replayed 40 times (--sample-events): 39 MiB written, 96.7 % of it already in the ring from a lap before"} {
		if !strings.Contains(text.String(), want) {
			t.Fatalf("bench text lacks %q:\n%s", want, text.String())
		}
	}
	// The peak is said against the budget in words, over or under.
	d := (float64(r.PeakRSSBytes) - float64(r.BudgetBytes)) / (1 << 20)
	want := fmt.Sprintf("%.0f MiB over the 320 MiB memory budget", d)
	if d < 0 {
		want = fmt.Sprintf("%.0f MiB under the 320 MiB memory budget", -d)
	}
	if !strings.Contains(text.String(), want) {
		t.Fatalf("bench text lacks %q:\n%s", want, text.String())
	}
	// A budget that cannot hold this process's fixed memory is refused
	// before the run, naming the minimum and what it is made of (it once
	// ran and peaked at 2x a 128MiB budget).
	out, err = run(t, "bench", "--events", "400", "--sources", "10", "--event-bytes", "20000", "--packing", "2",
		"--plugin", plugin, "--memory-budget", "128MiB")
	if err == nil || exitCode(err) != exitConfig || !strings.Contains(err.Error(), "--memory-budget 128MiB: want at least") ||
		!strings.Contains(err.Error(), "this executable's mapped pages") || !strings.Contains(err.Error(), "the Go runtime's floor 96MiB") {
		t.Fatalf("bench with a 128MiB budget: %v\n%s", err, out)
	}
	// Below what the split's shares hold (the inputs' 15 % under the
	// 16MiB ring): the same refusal naming the least budget, not the
	// split's problems (it exited 1 listing them).
	if _, err := run(t, "bench", "--events", "400", "--plugin", plugin, "--memory-budget", "80MiB"); err == nil ||
		exitCode(err) != exitConfig || !strings.Contains(err.Error(), "--memory-budget 80MiB: want at least") || strings.Contains(err.Error(), "memory_split") {
		t.Fatalf("bench with an 80MiB budget: %v", err)
	}
	// Not a size: the flag's error (it was reported at a line of the
	// configuration bench writes).
	for _, b := range []string{"0", "-5", "abc"} {
		if _, err := run(t, "bench", "--events", "400", "--plugin", plugin, "--memory-budget", b); err == nil ||
			exitCode(err) != exitConfig || !strings.Contains(err.Error(), "--memory-budget \""+b+"\"") || strings.Contains(err.Error(), "line ") {
			t.Fatalf("bench --memory-budget %s: %v", b, err)
		}
	}
}

// Flags no run can take are configuration errors (exit 3) naming the flag,
// refused before anything runs, never in the generated configuration's
// field names (inputs[0].emulator.ring_size, a line of YAML nobody wrote).
func TestBenchBadFlags(t *testing.T) {
	for _, c := range []struct{ args, want string }{
		{"--events 0", "--events 0: want at least 1"},
		{"--accept 0", "--accept 0:"},
		{"--accept 2", "--accept 2:"},
		{"--sources 0", "--sources 0:"},
		{"--event-bytes 150", "--event-bytes 150: want at least 8 bytes per source"},
		{"--packing 0", "--packing 0:"},
		{"--instances 0", "--instances 0:"},
		{"--sample-events 300", "--sample-events 300: want a divisor of --events 20000"},
		{"--events 100 --sample-events 200", "--sample-events 200: want a divisor of --events 100"},
		{"--ring-size -1", `--ring-size "-1": want a power of two between 1MiB and 64GiB`},
		{"--ring-size 3MiB", `--ring-size "3MiB": want a power of two`},
		{"--ring-size 512KiB", `--ring-size "512KiB": want a power of two`},
	} {
		out, err := run(t, append([]string{"bench"}, strings.Fields(c.args)...)...)
		if err == nil || exitCode(err) != exitConfig || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error()+out, "inputs[0]") {
			t.Errorf("bench %s: exit %d, %v\n%s\nwant exit %d naming %q", c.args, exitCode(err), err, out, exitConfig, c.want)
		}
	}
}

// The emulator's loop is the largest divisor of --events whose pass comes
// round in the ring (fills 15/16 to all of a lap), else the largest
// divisor up to 100 x packing (or a lap's worth), copied at every pass.
func TestBenchLoop(t *testing.T) {
	// 100 sources x 10 fragments of 1000 B: MFPs of 10112 bytes, records
	// of 10176, blocks of 1017600 bytes, 101760 ring bytes an event.
	for _, c := range []struct {
		events uint64
		ring   string
		want   uint64
	}{
		{20000, "16MiB", 160}, // 16 blocks, 16281600 of 16777216 bytes
		{40000, "16MiB", 160},
		{10000, "16MiB", 1000}, // no divisor from 155 to 164 events: copied
		{1500, "16MiB", 750},   // 150 events are 15264000 bytes, under 15/16 of the lap
		{100, "16MiB", 100},    // one pass
		{1, "16MiB", 1},
		{20000, "4MiB", 40},   // 4 blocks
		{20000, "64MiB", 625}, // 62 blocks and a packet of 5 per source
		{20000, "1MiB", 10},   // 1 block
	} {
		got := benchLoop(c.events, 100, 100_000, 10, c.ring)
		if got != c.want {
			t.Errorf("benchLoop(%d events, ring %s) = %d, want %d", c.events, c.ring, got, c.want)
		}
		if c.events%got != 0 {
			t.Errorf("benchLoop(%d events, ring %s) = %d, not a divisor", c.events, c.ring, got)
		}
	}
	// 1000 fragments of 1000 B per packet: a block (100 MB) is larger than
	// a 16MiB lap; a loop of 160 events is a packet of 160 fragments per
	// source, and comes round.
	if got := benchLoop(200000, 100, 100_000, 1000, "16MiB"); got != 160 {
		t.Errorf("benchLoop with blocks larger than a lap = %d, want 160", got)
	}
	if got := benchLoop(7919, 100, 100_000, 10, "16MiB"); got != 1 {
		t.Errorf("benchLoop of a prime number of events = %d, want 1", got)
	}
}
