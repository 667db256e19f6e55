package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-daq/sluice/node/farm/farmbench"
)

// TestFarmBench: sluice farm bench, two RU processes into one BU process
// in a network namespace through a tc-shaped veth link, a small and a
// large fragment at a 16 KiB queue. Both protocols build events, none
// incomplete; push's burst of two 32 KiB fragments overflows the queue
// (the link drops packets: the mechanism the bench is about), pull's
// one 512 B fragment at a time never does; the prediction is the
// formula's. Root only (ip netns, tc); skipped with a message otherwise.
func TestFarmBench(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("farm bench needs root (ip netns, tc): skipped")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("farm bench needs ip and tc (iproute2): skipped")
	}
	if out, err := exec.Command("ip", "netns", "add", "sluice-fb-probe").CombinedOutput(); err != nil {
		t.Skipf("cannot create a network namespace here (%v: %s): skipped", err, bytes.TrimSpace(out))
	}
	exec.Command("ip", "netns", "del", "sluice-fb-probe").Run()
	cmd := exec.Command(filepath.Join(bin, "sluice"), "farm", "bench", "--rus", "2", "--sizes", "512,32KiB",
		"--queues", "16KiB", "--warmup", "200ms", "--measure", "700ms", "--json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("farm bench: %v\n%s", err, stderr.String())
	}
	var r farmbench.Result
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("farm bench --json: %v\n%s", err, out)
	}
	if len(r.Points) != 4 {
		t.Fatalf("%d points, want 4: %s", len(r.Points), out)
	}
	for _, p := range r.Points {
		if p.EventsPerSec <= 0 || p.Incomplete != 0 || p.P50 <= 0 || p.P99 < p.P50 {
			t.Errorf("%s %d B: %+v: want events, none incomplete, latencies", p.Protocol, p.Size, p)
		}
		switch {
		case p.Protocol == "push" && p.Size == 32<<10 && p.Drops == 0:
			t.Errorf("push of two 32 KiB fragments into a 16 KiB queue dropped nothing: %+v", p)
		case p.Protocol == "pull" && p.Size == 512 && p.Drops != 0:
			t.Errorf("pull of one 512 B fragment at a time dropped %d packets", p.Drops)
		}
	}
	if got := r.Predicted[16<<10]; got != float64(16<<10+4096)/2 {
		t.Errorf("predicted crossover %v, want (16 KiB + 4 KiB) / 2", got)
	}
	if strings.Contains(stderr.String(), "panic") {
		t.Errorf("stderr: %s", stderr.String())
	}
}
