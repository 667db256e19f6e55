package plugins

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestStdoutBeforeServe: a plugin that prints to standard output before
// serving fails to start with an error saying so and quoting (escaped,
// bounded) what it printed, also when the line is longer than go-plugin's
// 64 KiB handshake reader; go-plugin's own scanner error is not logged and
// no process is left.
func TestStdoutBeforeServe(t *testing.T) {
	const say = "the plugin wrote to standard output before serving; go-plugin uses stdout for its handshake"
	for name, want := range map[string]string{
		"chatty":   `(first bytes: "chatty: loading calibration\tv2 \x01\n")`,
		"longline": `(first 128 bytes: "longline: ` + strings.Repeat("0123456789", 12)[:118] + `")`,
	} {
		log, logs := testLogger()
		_, err := Start(context.Background(), pluginPath(name), Options{Logger: log, StartTimeout: 10 * time.Second})
		if want := "trigger plugin " + pluginPath(name) + ": handshake: " + say + " " + want; err == nil || err.Error() != want {
			t.Errorf("%s: error\n%v\nwant\n%s", name, err, want)
		}
		if s := logs.String(); strings.Contains(s, "scanning stdout") || strings.Contains(s, "failed to exit gracefully") {
			t.Errorf("%s: misleading log lines:\n%s", name, s)
		}
		if kids := children(t); len(kids) > 0 {
			t.Errorf("%s: child processes left: %v", name, kids)
		}
	}
}

// TestStdoutAfterServeLogged: what a serving plugin writes to os.Stdout,
// to its descriptor 1 and to os.Stderr reaches the node's log, a record
// per line labelled with stage and plugin, a line of 100 KiB cut to
// maxLogLine bytes with the rest counted; the plugin keeps deciding.
func TestStdoutAfterServeLogged(t *testing.T) {
	buf := &logBuffer{}
	log := slog.New(slog.NewJSONHandler(buf, nil))
	p, err := Start(context.Background(), pluginPath("talker"), Options{Logger: log, Stage: "hlt1"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Configure(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	mem := checkedMem(t)
	for _, rec := range synthetic(t, mem, 0, 20, 10, 32) {
		res, err := p.Decide(context.Background(), rec)
		if err != nil || len(res) != 10 {
			t.Fatalf("decide: %v, %d verdicts", err, len(res))
		}
	}
	long := "talker: long " + strings.Repeat("0123456789", 10<<10)
	want := map[string]bool{
		msgStdout + " talker: configured":              false,
		msgStdout + " talker: batch 1 of 10 events":    false,
		msgStdout + " talker: batch 2 of 10 events":    false,
		msgStdout + " talker: raw batch 1":             false,
		msgStdout + " talker: raw batch 2":             false,
		msgStderr + " talker: stderr batch 1":          false,
		msgStderr + " talker: stderr batch 2":          false,
		msgStdout + " " + long[:maxLogLine] + " (cut)": false,
	}
	var bad []string
	for deadline := time.Now().Add(20 * time.Second); ; {
		bad = bad[:0]
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			if line == "" {
				continue
			}
			var r struct {
				Msg, Level, Stage, Plugin, Line string
				Cut                             int `json:"cut_bytes"`
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			if r.Msg != msgStdout && r.Msg != msgStderr {
				continue
			}
			key := r.Msg + " " + r.Line
			if r.Cut > 0 {
				key += " (cut)"
				if r.Cut != len(long)-maxLogLine {
					bad = append(bad, "cut_bytes "+line)
				}
			}
			if _, ok := want[key]; !ok || r.Level != "INFO" || r.Stage != "hlt1" || r.Plugin != "talker" {
				bad = append(bad, line)
				continue
			}
			want[key] = true
		}
		missing := 0
		for _, seen := range want {
			if !seen {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			if missing > 0 {
				t.Fatalf("not logged: %v\nlog:\n%s", want, buf.String())
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(bad) > 0 {
		t.Fatalf("unexpected output records:\n%s", strings.Join(bad, "\n"))
	}
}
