package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSizesRefusedAtOnce: settings that validate one by one but could not
// run are refused by `sluice config validate` and by `sluice run` before
// anything of their size is allocated, naming the field. 16 groups of 2^20
// sources took 10 s of CPU and ~1 GB resident to be refused (the ids were
// listed in a map to find overlaps); now each process stays under 200 MB
// peak resident. max_open_events 10^12 and a store.min_free_bytes beyond
// the disk are refused too (the latter by run's preflight, which checks
// the machine).
func TestSizesRefusedAtOnce(t *testing.T) {
	var groups strings.Builder
	for g := range 16 {
		fmt.Fprintf(&groups, "  - {name: g%d, sources: \"%d-%d\"}\n", g, g<<20, g<<20+1<<20-1)
	}
	store := filepath.Join(t.TempDir(), "store")
	head := "inputs:\n  - uri: tcp://127.0.0.1:0\nstore: {path: " + store + "}\nhttp: {address: \"off\"}\nflight: {listen: \"off\"}\n"
	for _, c := range []struct {
		name, yaml string
		want       []string // in the output
		preflight  bool     // only run (and validate --preflight) see it
	}{
		{"sources", head + "sources:\n" + groups.String(),
			[]string{"sources[0].sources: \"0-1048575\": 1048576 sources x 320 bytes of per-source state", "more than the Go heap's share of node.memory_budget"}, false},
		{"max_open_events", head + "sources: [{name: a, sources: \"0-3\"}]\nbuilder: {max_open_events: 1000000000000}\n",
			[]string{"builder.max_open_events: 1000000000000: the builder's bookkeeping for 1000000000256 open events"}, false},
		{"min_free_bytes", strings.Replace(head, "store: {path: "+store+"}", "store: {path: "+store+", min_free_bytes: 1PiB}", 1) + "sources: [{name: a, sources: \"0-3\"}]\n",
			[]string{"store.min_free_bytes: 1PiB: want less than the size of the file system"}, true},
	} {
		cfg := writeConfig(t, c.yaml, nil)
		validate := []string{"config", "validate", cfg}
		if c.preflight {
			validate = append(validate, "--preflight")
		}
		for _, args := range [][]string{validate, {"run", "--config", cfg}} {
			t.Run(c.name+"/"+args[0], func(t *testing.T) {
				t0 := time.Now()
				p := start(t, args...)
				code := p.wait(t, 2*time.Minute)
				wall := time.Since(t0)
				out := p.stdout.String() + p.log()
				if code != 3 {
					t.Fatalf("sluice %v: exit %d, want 3 (configuration problems)\n%s", args, code, out)
				}
				for _, w := range c.want {
					if !strings.Contains(out, w) {
						t.Errorf("sluice %v does not say %q:\n%s", args, w, out)
					}
				}
				ru := p.cmd.ProcessState.SysUsage().(*syscall.Rusage)
				cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
				t.Logf("sluice %s: refused in %v wall, %v CPU, %d MB peak resident", args[0], wall.Round(time.Millisecond), cpu.Round(time.Millisecond), ru.Maxrss>>10)
				if ru.Maxrss > 200<<10 { // KiB
					t.Errorf("sluice %v reached %d MB resident before refusing, want < 200 MB", args, ru.Maxrss>>10)
				}
			})
		}
	}
}
