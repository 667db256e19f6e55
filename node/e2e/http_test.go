package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// httpRunConfig runs until stopped: a slow synthetic emulator, no trigger
// stage (every event deferred).
const httpRunConfig = `
inputs:
  - uri: shm://{{SHM}}
    emulator: {duration: 5m, rate: 2000, ring_size: 4MiB}
sources:
  - {name: tracker, sources: "0-3"}
store: {path: {{STORE}}, min_free_bytes: 256MiB}
http: {address: "{{ADDR}}"{{HTTP}}}
log: {format: json}
`

// post sends POST url with a text/plain body, as a browser's simple
// request or `curl -H ... --data` would, and returns the status and body.
func post(t *testing.T, url string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader("stop"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/plain")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// logRecords are p's JSON log records with message msg.
func (p *proc) logRecords(msg string) []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []map[string]any
	for _, line := range p.stderr {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) == nil && r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

// TestStopRefusesCrossOriginEndToEnd: `sluice run` on loopback refuses a
// cross-origin POST /run/stop (what a web page open in the operator's
// browser sends) with 403 and keeps running, logging who asked; a
// request without Origin (curl) drains it and it exits 0.
func TestStopRefusesCrossOriginEndToEnd(t *testing.T) {
	summary := filepath.Join(t.TempDir(), "run.json")
	p := start(t, "run", "--summary-json", summary, "--config", writeConfig(t, httpRunConfig, map[string]string{
		"SHM": shmName(t), "STORE": filepath.Join(t.TempDir(), "store"), "ADDR": "127.0.0.1:0", "HTTP": "",
	}))
	addr := p.httpAddr(t)
	base := "http://" + addr
	waitStored(t, p, addr, 100)
	for _, hdr := range []map[string]string{
		{"Origin": "http://evil.example", "User-Agent": "evil-page/1.0"},
		{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example", "User-Agent": "evil-page/1.0"},
	} {
		if code, body := post(t, base+"/run/stop", hdr); code != http.StatusForbidden || !strings.HasPrefix(body, "refused: cross-origin request") {
			t.Fatalf("cross-origin POST /run/stop %v: %d %q, want 403", hdr, code, body)
		}
	}
	// The run goes on: more events are stored, and it is still running.
	s, err := getStatus(t, addr)
	if err != nil {
		t.Fatal(err)
	}
	if after := waitStored(t, p, addr, s.Ledger.EventsStored+100); after.State != "running" {
		t.Fatalf("state %s after refused stops", after.State)
	}
	refused := p.logRecords("POST /run/stop refused: cross-origin request")
	if len(refused) != 2 {
		t.Fatalf("%d refusals logged, want 2:\n%s", len(refused), p.log())
	}
	for _, r := range refused {
		if r["level"] != "WARN" || r["user_agent"] != "evil-page/1.0" || r["origin"] != "http://evil.example" || !strings.HasPrefix(r["remote"].(string), "127.0.0.1:") {
			t.Errorf("refusal logged as %v", r)
		}
	}

	if code, body := post(t, base+"/run/stop", map[string]string{"User-Agent": "curl/8.5.0"}); code != http.StatusAccepted || body != "draining\n" {
		t.Fatalf("POST /run/stop without Origin: %d %q", code, body)
	}
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d after POST /run/stop:\n%s", code, p.log())
	}
	if l := readLedger(t, summary); !l.Balanced || l.EventsStored < 200 {
		t.Fatalf("ledger %+v", l)
	}
	acc := p.logRecords("POST /run/stop: drain requested")
	if len(acc) != 1 || acc[0]["level"] != "INFO" || acc[0]["user_agent"] != "curl/8.5.0" || !strings.HasPrefix(acc[0]["remote"].(string), "127.0.0.1:") {
		t.Fatalf("accepted stop logged as %v", acc)
	}
}

// TestHTTPOffLoopbackNeedsToken: `sluice run` listening on every interface
// refuses to start without http.token_file (exit 3 naming the field); with
// one, POST /run/stop needs the token and /status names no file path.
func TestHTTPOffLoopbackNeedsToken(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	vars := map[string]string{"SHM": shmName(t), "STORE": store, "ADDR": "0.0.0.0:0", "HTTP": ""}
	p := start(t, "run", "--config", writeConfig(t, httpRunConfig, vars))
	if code := p.wait(t, 30*time.Second); code != 3 || !strings.Contains(p.log(), `http.token_file: want a file holding the token POST /run/stop requires, since address "0.0.0.0:0" is not loopback`) {
		t.Fatalf("exit %d, want 3 naming http.token_file:\n%s", code, p.log())
	}

	const token = "e2e-token-0123456789abcdef"
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	vars["HTTP"] = ", token_file: " + tokenFile
	p = start(t, "run", "--config", writeConfig(t, httpRunConfig, vars))
	_, port, err := net.SplitHostPort(p.httpAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + port
	waitStored(t, p, addr, 50)
	body, err := httpGet("http://" + addr + "/status")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(body), store) || strings.Contains(string(body), tokenFile) || !strings.Contains(string(body), `"paths_hidden": true`) {
		t.Errorf("/status off loopback:\n%s", body)
	}
	if code, _ := post(t, "http://"+addr+"/run/stop", nil); code != http.StatusUnauthorized {
		t.Fatalf("POST /run/stop without the token: %d, want 401", code)
	}
	if code, _ := post(t, "http://"+addr+"/run/stop", map[string]string{"Authorization": "Bearer not-" + token}); code != http.StatusUnauthorized {
		t.Fatalf("POST /run/stop with a wrong token: %d, want 401", code)
	}
	if s, err := getStatus(t, addr); err != nil || s.State != "running" {
		t.Fatalf("after refused stops: %+v %v", s, err)
	}
	if code, _ := post(t, "http://"+addr+"/run/stop", map[string]string{"Authorization": "Bearer " + token}); code != http.StatusAccepted {
		t.Fatalf("POST /run/stop with the token: %d, want 202", code)
	}
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d after POST /run/stop:\n%s", code, p.log())
	}
}
