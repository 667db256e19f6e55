package plugins

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestFailedHandshakeQuiet: a binary that fails the handshake is killed
// without go-plugin's misleading "failed to exit gracefully" warning, and
// no process of it is left.
func TestFailedHandshakeQuiet(t *testing.T) {
	for _, name := range []string{"notplugin", "wrongproto"} {
		log, logs := testLogger()
		_, err := Start(context.Background(), pluginPath(name), Options{Logger: log, StartTimeout: 5 * time.Second})
		if err == nil {
			t.Fatalf("%s: started", name)
		}
		if s := logs.String(); strings.Contains(s, "failed to exit gracefully") {
			t.Errorf("%s: misleading warning logged:\n%s", name, s)
		}
		if kids := children(t); len(kids) > 0 {
			t.Errorf("%s: child processes left: %v", name, kids)
		}
	}
}

// TestStartStageLabel: Start labels the plugin's log lines with
// Options.Stage, never with an empty stage.
func TestStartStageLabel(t *testing.T) {
	for _, c := range []struct{ stage, want string }{{"check", "stage=check"}, {"", "stage=standalone"}} {
		log, logs := testLogger()
		p, err := Start(context.Background(), pluginPath("passthrough"), Options{Logger: log, Stage: c.stage})
		if err != nil {
			t.Fatal(err)
		}
		p.Close()
		s := logs.String()
		if !strings.Contains(s, "plugin process exited") || !strings.Contains(s, c.want) || strings.Contains(s, `stage=""`) {
			t.Errorf("stage %q: want lines labelled %s:\n%s", c.stage, c.want, s)
		}
	}
}

// TestRegionPrefix: the exported prefix is what the host's region files
// start with.
func TestRegionPrefix(t *testing.T) {
	p, err := Start(context.Background(), pluginPath("passthrough"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	mem := checkedMem(t)
	for _, rec := range synthetic(t, mem, 0, 10, 10, 32) {
		if _, err := p.Decide(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	files, _ := filepath.Glob(filepath.Join(p.in.region.Path[:strings.LastIndex(p.in.region.Path, "/")], RegionPrefix+strconv.Itoa(os.Getpid())+"-*"))
	if len(files) == 0 || !strings.HasPrefix(filepath.Base(p.in.region.Path), RegionPrefix) {
		t.Fatalf("region %s does not start with %q (found %v)", p.in.region.Path, RegionPrefix, files)
	}
}

// children lists the processes whose parent is this test process.
func children(t *testing.T) []int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc")
	}
	me := strconv.Itoa(os.Getpid())
	var out []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the parenthesised command: state, ppid, ...
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 1 && f[1] == me && f[0] != "Z" {
			out = append(out, pid)
		}
	}
	return out
}

// TestStartLeavesNoSocketDir: go-plugin makes a directory for each plugin
// process's socket; none is left after a plugin closed or failed to start,
// even when its binary could not be run at all.
func TestStartLeavesNoSocketDir(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	for _, name := range []string{"nosuchplugin", "notplugin", "chatty", "wrongproto", "passthrough"} {
		p, err := Start(context.Background(), pluginPath(name), Options{StartTimeout: 5 * time.Second})
		if err == nil {
			p.Close()
		}
		if left, _ := os.ReadDir(tmp); len(left) > 0 {
			t.Errorf("%s: left in the temporary directory: %v", name, left)
		}
	}
}
