package e2e

import (
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMaxConnectionsRefusesExtras: a TCP input with max_connections 4
// receives a readout of 4 connections (sources 0-3, paced); 3 more
// connections opened while it sends are refused at once (each one's read
// ends with a reset or EOF, not a stream left hanging), counted on
// /status and in sluice_input_connections_refused_total, and logged with
// reason max_connections through the log's rate limit (rate_limit 1: one
// record, the others counted as suppressed). The 4 streams keep
// delivering meanwhile and after the extras closed, and every event is
// built whole: the run ends balanced.
func TestMaxConnectionsRefusesExtras(t *testing.T) {
	const events = 600
	summary := filepath.Join(t.TempDir(), "run.json")
	text := strings.Replace(tcpInputConfig, "expect_streams: 1{{MAX}}", "expect_streams: 4\n    max_connections: 4", 1)
	text = strings.Replace(text, "log: {format: json}", "log: {format: json, rate_limit: 1, rate_interval: 1h}", 1)
	cfg := writeConfig(t, text, map[string]string{"STORE": filepath.Join(t.TempDir(), "store")})
	node := start(t, "run", "--config", cfg, "--summary-json", summary)
	addr := node.httpAddr(t)
	input := waitInput(t, node, addr, "the input's address", func(in inputStatus) bool { return in.Address != "" }).Address
	w := start(t, "readout", "--to", "tcp://"+input, "--events", fmt.Sprint(events), "--sources", "4", "--connections", "4", "--rate", "100")
	built := func() uint64 {
		s, err := getStatus(t, addr)
		if err != nil {
			return 0
		}
		return s.Ledger.EventsBuilt
	}
	waitInput(t, node, addr, "the readout's 4 connections", func(in inputStatus) bool { return in.Open == 4 })
	waitFor(t, "events built from the 4 streams", time.Minute, func() bool { return built() >= 50 })

	// The extras: the node resets each at once. A reset that comes before
	// the handshake ends fails the dial itself.
	refused := 0
	for i := range 3 {
		c, err := net.Dial("tcp", input)
		if errors.Is(err, syscall.ECONNRESET) {
			refused++
			continue
		}
		if err != nil {
			t.Fatalf("extra connection %d: %v", i, err)
		}
		// Generous: a loaded machine may take a while to schedule the
		// node's accept; a connection it kept would never end.
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		n, err := c.Read(make([]byte, 1))
		c.Close()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("extra connection %d: still open after 30 s (max_connections 4 with 4 open)", i)
		}
		if n != 0 || !(errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF)) {
			t.Fatalf("extra connection %d: read %d bytes, %v; want a reset", i, n, err)
		}
		refused++
	}
	if refused != 3 {
		t.Fatalf("%d extra connections refused, want 3", refused)
	}
	in := waitInput(t, node, addr, "3 refused", func(in inputStatus) bool { return in.Refused["max_connections"] == 3 })
	if in.Open != 4 || len(in.AcceptErrors) != 0 {
		t.Fatalf("input after 3 connections beyond max_connections 4: %+v", in)
	}
	m := scrape(t, addr)
	if want := fmt.Sprintf("sluice_input_connections_refused_total{input=%q,reason=\"max_connections\"} 3\n", "tcp://127.0.0.1:0"); !strings.Contains(m, want) {
		t.Errorf("/metrics lacks %s", want)
	}
	// The records are written after the counts /status shows.
	rec := []string{`"msg":"readout input refused a connection: max_connections open"`,
		`"input":"tcp://` + input + `","reason":"max_connections","max_connections":4,"from":"max_connections","remote":"127.0.0.1:`}
	logged := func() int {
		n := 0
		for _, line := range strings.Split(node.log(), "\n") {
			if strings.Contains(line, rec[0]) && strings.Contains(line, rec[1]) {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(20 * time.Second)
	for logged() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no log record with %s after 20 s:\n%s", rec, node.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	var suppressed float64
	for _, line := range strings.Split(scrape(t, addr), "\n") {
		if v, ok := strings.CutPrefix(line, "sluice_log_records_suppressed_total "); ok {
			if _, err := fmt.Sscan(v, &suppressed); err != nil {
				t.Fatalf("/metrics: %q: %v", line, err)
			}
		}
	}
	if suppressed < 2 {
		t.Errorf("sluice_log_records_suppressed_total %v, want at least the 2 refusals past log.rate_limit 1", suppressed)
	}

	// The 4 streams go on after the extras closed.
	after := built()
	waitFor(t, "events built after the extras closed", time.Minute, func() bool { return built() >= after+50 })
	if in := inputOf(t, addr); in.Open != 4 || in.Refused["max_connections"] != 3 {
		t.Fatalf("input after the extras closed: %+v", in)
	}
	if code := w.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("sluice readout: exit %d\n%s", code, w.log())
	}
	if code := node.wait(t, time.Minute); code != 0 {
		t.Fatalf("sluice run: exit %d\n%s", code, node.log())
	}
	if l := readLedger(t, summary); !l.Balanced || l.EventsBuilt != events || l.EventsIncomplete != 0 || l.EventsStored != events {
		t.Fatalf("ledger %+v", l)
	}
	if n := logged(); n != 1 || strings.Count(node.log(), rec[0]) != 1 {
		t.Errorf("%d refusal records, want 1 (log.rate_limit 1: the others suppressed)\n%s", n, node.log())
	}
}
