package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// notStartedConfig is a node of one input; INPUT is its inputs entry.
const notStartedConfig = `
run: 41
inputs:
  - {{INPUT}}
sources:
  - {name: tracker, sources: "0-3"}
builder: {timeout: 1s}
store: {path: {{STORE}}, min_free_bytes: 256MiB}
http: {address: "127.0.0.1:0"}
log: {format: json}
`

// TestRunThatFailsBeforeItsFirstEvent: a run that fails before its first
// event (an emulator file that does not decode, a file input that does
// not, a store another node holds) prints that it did not start and why,
// not an all-zero ledger reading "balanced yes", and exits 4; its summary
// says so too. It is not recorded as ended on the store: the same run
// number then runs without --rerun. A file that does not exist is a
// configuration problem (exit 3).
func TestRunThatFailsBeforeItsFirstEvent(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.dat")
	if err := os.WriteFile(junk, []byte(strings.Repeat("not a readout file\n", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	shm := shmName(t)
	store := filepath.Join(dir, "store")
	config := func(input string) string {
		return writeConfig(t, notStartedConfig, map[string]string{"INPUT": input, "STORE": store})
	}
	notStarted := func(file, why string, args ...string) {
		t.Helper()
		summary := filepath.Join(t.TempDir(), "run.json")
		p := start(t, append([]string{"run", "--config", file, "--summary-json", summary}, args...)...)
		code := p.wait(t, time.Minute)
		out := p.stdout.String()
		if code != 4 || !strings.HasPrefix(out, "run ") || !strings.Contains(out, " did not start: ") || !strings.Contains(out, why) ||
			strings.Contains(out, "balanced") || strings.Contains(out, "fragments received") {
			t.Fatalf("exit %d, want 4 and the ledger saying the run did not start (%s):\nstdout:\n%s\nstderr:\n%s", code, why, out, p.log())
		}
		if l := readLedger(t, summary); l.Balanced || !strings.Contains(l.NotStarted, why) {
			t.Fatalf("summary: balanced %v, not_started %q", l.Balanced, l.NotStarted)
		}
	}

	notStarted(config("{uri: shm://"+shm+", emulator: {from: "+junk+"}}"),
		"inputs[0] shm://"+shm+": emulator: "+junk+": ")
	notStarted(config("{uri: file://"+junk+"}"), "input file://"+junk+": ")

	// The store held by a node that runs (its TCP input waits for boards).
	holder := start(t, "run", "--config", config("{uri: tcp://127.0.0.1:0}"), "--run", "40")
	holder.httpAddr(t)
	notStarted(config("{uri: shm://"+shm+", emulator: {events: 10}}"), "store in use by another process")
	if err := holder.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := holder.wait(t, time.Minute); code != 0 {
		t.Fatalf("the node holding the store: exit %d\n%s", code, holder.log())
	}

	// Run 41 did not start, so it is free: no rerun refused.
	out := runOK(t, "run", "--config", config("{uri: shm://"+shm+", emulator: {events: 100}}"))
	if !strings.Contains(out, "events built") || !regexp.MustCompile(`balanced\s+yes`).MatchString(out) {
		t.Fatalf("run 41 after it did not start:\n%s", out)
	}

	p := start(t, "run", "--config", config("{uri: shm://"+shm+", emulator: {from: "+filepath.Join(dir, "missing.dat")+"}}"))
	if code := p.wait(t, time.Minute); code != 3 || !strings.Contains(p.log(), "want an existing file") {
		t.Fatalf("a missing emulator file: exit %d, want 3\n%s", code, p.log())
	}
}
