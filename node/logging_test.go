package node

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/config"
)

func TestRateLimitPerKey(t *testing.T) {
	var buf bytes.Buffer
	rl := NewRateLimitHandler(slog.NewJSONHandler(&buf, nil), 3, time.Second)
	now := time.Unix(1000, 0)
	rl.st.now = func() time.Time { return now }
	log := slog.New(rl)

	for i := 0; i < 100; i++ {
		log.Error("bad fragment", "source", 7, "event", i)
	}
	log.Error("bad fragment", "source", 8, "event", 0) // another source is not hidden
	log.With("input", "tcp://a").Warn("reconnect")
	log.With("input", "tcp://b").Warn("reconnect")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 6 {
		t.Fatalf("got %d records, want 3 of source 7 + 1 of source 8 + 2 reconnects:\n%s", len(lines), buf.String())
	}
	if rl.Suppressed() != 97 {
		t.Fatalf("suppressed = %d, want 97", rl.Suppressed())
	}
	// The record at the limit says that more are suppressed; the ones
	// before it do not.
	for i, l := range lines[:3] {
		if has := strings.Contains(l, `"rate_limit":"3 like this per 1s: more are not logged until 1s after the first`); has != (i == 2) {
			t.Fatalf("record %d of source 7, rate_limit said %v:\n%s", i, has, l)
		}
	}

	// After the interval the next record of the key passes and says how
	// many were hidden.
	now = now.Add(time.Second)
	buf.Reset()
	log.Error("bad fragment", "source", 7, "event", 100)
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["suppressed"] != float64(97) || rec["event"] != float64(100) {
		t.Fatalf("record after the window = %v, want suppressed=97", rec)
	}
}

func TestRateLimitSweepsOldKeys(t *testing.T) {
	rl := NewRateLimitHandler(slog.NewTextHandler(&bytes.Buffer{}, nil), 1, time.Second)
	now := time.Unix(0, 0)
	rl.st.now = func() time.Time { return now }
	log := slog.New(rl)
	for i := 0; i < 3*maxKeys; i++ {
		if i%maxKeys == 0 {
			now = now.Add(2 * time.Second)
		}
		log.Info("x", "source", i)
	}
	if n := len(rl.st.windows); n > maxKeys {
		t.Fatalf("%d keys kept, bound is %d", n, maxKeys)
	}
}

func TestNewLoggerFormat(t *testing.T) {
	var buf bytes.Buffer
	log, _ := NewLogger(&buf, config.Log{Level: "warn", Format: "auto", RateLimit: 5, RateInterval: time.Second})
	log.Info("hidden")
	log.Warn("shown", "k", 1)
	// A bytes.Buffer is not a terminal: auto means JSON.
	if !json.Valid(bytes.TrimSpace(buf.Bytes())) || strings.Contains(buf.String(), "hidden") {
		t.Fatalf("auto format off a terminal should be JSON at level warn: %q", buf.String())
	}
	buf.Reset()
	log, _ = NewLogger(&buf, config.Log{Level: "debug", Format: "text", RateInterval: time.Second})
	log.Debug("dbg")
	if !strings.Contains(buf.String(), "level=DEBUG msg=dbg") {
		t.Fatalf("text format: %q", buf.String())
	}
}
