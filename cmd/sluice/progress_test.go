package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/sluice-daq/sluice/node"
)

// progressConfig is a node config whose emulator sends 600 events at 250
// events/s (~2.4 s), with logs at info.
func progressConfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`
run: 31
inputs:
  - uri: shm://sluice-progress-%d-%d
    emulator: {events: 600, rate: 250, packing: 5, fragment_size: {mean: 512}, ring_size: 4MiB}
sources:
  - {name: ecal, sources: "0-3"}
builder: {batch_events: 50, timeout: 200ms}
store: {path: %s, min_free_bytes: 16MiB}
http: {address: "127.0.0.1:0"}
log: {level: info, format: text}
`, os.Getpid(), len(t.Name()), filepath.Join(dir, "store"))
	file := filepath.Join(dir, "node.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// On a terminal `sluice run` shows one progress line, redrawn in place
// (carriage return, no new line) with the event rate, throughput,
// incomplete fraction, deferred backlog and store headroom, and clears it
// before each log record; off a terminal the logs are all there is.
func TestRunProgressOnATerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	var screen bytes.Buffer
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(&screen, ptmx) })

	var stdout bytes.Buffer
	root := newRootCmd()
	root.SetOut(&stdout)
	root.SetErr(tty)
	root.SetArgs([]string{"run", "--config", progressConfig(t)})
	if err := root.Execute(); err != nil {
		t.Fatalf("run: %v\n%s", err, stdout.String())
	}
	tty.Close()
	wg.Wait()
	out := screen.String()
	i := strings.Index(out, "run 31 running: ")
	if i < 0 {
		t.Fatalf("no progress line on the terminal:\n%q", out)
	}
	line := out[i:]
	line = line[:strings.IndexAny(line, "\r\n")]
	for _, w := range []string{" events/s, ", " GB/s, incomplete ", "%, deferred backlog ", ", store headroom ", " GiB"} {
		if !strings.Contains(line, w) {
			t.Errorf("progress line %q lacks %q", line, w)
		}
	}
	if !strings.Contains(out, "\r\x1b[K") || !strings.Contains(out, "msg=\"run state\"") {
		t.Errorf("log records not written over a cleared progress line:\n%q", out)
	}
	if strings.Contains(stdout.String(), "events/s") || !strings.Contains(stdout.String(), "balanced") {
		t.Errorf("stdout (the ledger) has the progress line or lacks the ledger:\n%s", stdout.String())
	}

	// Off a terminal: the same run logs only, no progress text.
	var logs bytes.Buffer
	root = newRootCmd()
	root.SetOut(io.Discard)
	root.SetErr(&logs)
	root.SetArgs([]string{"run", "--config", progressConfig(t)})
	if err := root.Execute(); err != nil {
		t.Fatalf("run off a terminal: %v\n%s", err, logs.String())
	}
	if strings.Contains(logs.String(), "events/s") || strings.Contains(logs.String(), "\r") || !strings.Contains(logs.String(), `msg="run state"`) {
		t.Errorf("logs off a terminal:\n%s", logs.String())
	}
}

// replay's bar shows one ETA, the replay's own in its description, not
// also the bar's [elapsed:left].
func TestReplayBarOneETA(t *testing.T) {
	var b bytes.Buffer
	bar := newReplayBar(&b, 1000)
	rate, eta := replayRate(node.ReplaySummary{Selected: 1000, Replayed: 100, DurationSeconds: 1})
	bar.Describe(fmt.Sprintf("replay %.0f events/s, ETA %s", rate, eta))
	if err := bar.Set64(100); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond) // past the bar's throttle
	if err := bar.Set64(200); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "ETA 9s") || regexp.MustCompile(`\[\d+\w*:\d*\w*\]`).MatchString(out) {
		t.Fatalf("bar %q", out)
	}
}
