package node

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/config"
	"github.com/sluice-daq/sluice/node/transport"
)

// syncBuffer is a log sink the server's goroutines write to concurrently.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// records are the JSON log records written so far.
func (s *syncBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// request sends method url with the headers (and, for "Host", the Host)
// and a text/plain body as a browser's simple request would, and returns
// the status and body.
func request(t *testing.T, method, url string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader("stop"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/plain")
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
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

// TestStopRefusesCrossOrigin: on loopback without a token, POST /run/stop
// from a web page (a foreign Origin, a Sec-Fetch-Site other than
// same-origin, a Host that is not loopback as after DNS rebinding) is
// refused with 403 and the run goes on; curl-style and same-origin
// requests stop it. Who asked is logged either way.
func TestStopRefusesCrossOrigin(t *testing.T) {
	f := &fakeControl{}
	f.state.Store(int32(StateRunning))
	var logs syncBuffer
	base := startAccessHTTP(t, f, "127.0.0.1:0", httpAccess{Loopback: true, ShowPaths: true}, slog.New(slog.NewJSONHandler(&logs, nil)))
	host := strings.TrimPrefix(base, "http://")
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want string
	}{
		{"foreign origin", map[string]string{"Origin": "http://evil.example"}, "refused: cross-origin request (cross-origin request detected, and/or browser is out of date: Sec-Fetch-Site is missing, and Origin does not match Host)\\n"},
		{"origin on another port", map[string]string{"Origin": "http://127.0.0.1:1"}, "refused: cross-origin request"},
		{"cross-site", map[string]string{"Sec-Fetch-Site": "cross-site"}, "refused: cross-origin request (cross-origin request detected from Sec-Fetch-Site header)\\n"},
		{"same-site", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://localhost:1"}, "refused: cross-origin request"},
		{"dns rebinding", map[string]string{"Host": "evil.example:" + strings.Split(host, ":")[1], "Origin": "http://evil.example:" + strings.Split(host, ":")[1]},
			`refused: Host "evil.example:` + strings.Split(host, ":")[1] + `" is not a loopback name; this endpoint listens on loopback only` + "\\n"},
	} {
		hdr := map[string]string{"User-Agent": "evil-page/1.0"}
		for k, v := range tc.hdr {
			hdr[k] = v
		}
		code, body := request(t, "POST", base+"/run/stop", hdr)
		if code != http.StatusForbidden || !strings.HasPrefix(strings.ReplaceAll(body, "\n", `\n`), tc.want) {
			t.Errorf("%s: %d %q, want 403 %q", tc.name, code, body, tc.want)
		}
	}
	if n := f.stops.Load(); n != 0 || State(f.state.Load()) != StateRunning {
		t.Fatalf("after refused requests: %d stops, state %v", n, State(f.state.Load()))
	}
	// A rebound name cannot read /status either.
	if code, _ := request(t, "GET", base+"/status", map[string]string{"Host": "evil.example"}); code != http.StatusForbidden {
		t.Errorf("GET /status with Host evil.example: %d, want 403", code)
	}
	refused := 0
	for _, r := range logs.records(t) {
		if r["msg"] == "POST /run/stop refused: cross-origin request" {
			refused++
			if r["level"] != "WARN" || r["user_agent"] != "evil-page/1.0" || !strings.HasPrefix(r["remote"].(string), "127.0.0.1:") {
				t.Errorf("refusal logged as %v", r)
			}
		}
	}
	if refused != 4 {
		t.Errorf("%d cross-origin refusals logged, want 4:\n%v", refused, logs.records(t))
	}

	if code, body := request(t, "POST", base+"/run/stop", map[string]string{"Origin": base, "User-Agent": "sluice-panel"}); code != http.StatusAccepted || body != "draining\n" {
		t.Fatalf("same-origin POST /run/stop: %d %q", code, body)
	}
	if code, _ := request(t, "POST", base+"/run/stop", map[string]string{"User-Agent": "curl/8.5.0", "Host": "localhost"}); code != http.StatusAccepted {
		t.Fatalf("curl-style POST /run/stop: %d", code)
	}
	if n := f.stops.Load(); n != 2 || State(f.state.Load()) != StateDraining {
		t.Fatalf("after two accepted requests: %d stops, state %v", n, State(f.state.Load()))
	}
	var agents []string
	for _, r := range logs.records(t) {
		if r["msg"] == "POST /run/stop: drain requested" && r["level"] == "INFO" && strings.HasPrefix(r["remote"].(string), "127.0.0.1:") {
			agents = append(agents, r["user_agent"].(string))
		}
	}
	if strings.Join(agents, ",") != "sluice-panel,curl/8.5.0" {
		t.Errorf("accepted stops logged for %v, want sluice-panel, curl/8.5.0", agents)
	}
}

// TestStopNeedsTokenOffLoopback: listening on every interface, POST
// /run/stop needs the token (401 without it or with another), a
// cross-origin request is refused even with it, and /status names no
// file path.
func TestStopNeedsTokenOffLoopback(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	if _, err := startHTTP("0.0.0.0:0", httpAccess{}, http.NotFoundHandler(), slog.New(slog.DiscardHandler)); err == nil ||
		err.Error() != "0.0.0.0:0 is not a loopback address and no token is set (http.token_file): POST /run/stop would be open to the network" {
		t.Fatalf("serving on 0.0.0.0 without a token: %v", err)
	}
	f := &fakeControl{}
	f.state.Store(int32(StateRunning))
	var logs syncBuffer
	base := startAccessHTTP(t, f, "0.0.0.0:0", httpAccess{Token: token}, slog.New(slog.NewJSONHandler(&logs, nil)))
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		code int
		body string
	}{
		{"no token", nil, 401, "refused: no token (send \"Authorization: Bearer TOKEN\" with the token of http.token_file)\n"},
		{"wrong token", map[string]string{"Authorization": "Bearer " + token[:31] + "0"}, 401, "refused: wrong token (send \"Authorization: Bearer TOKEN\" with the token of http.token_file)\n"},
		{"token as basic auth", map[string]string{"Authorization": "Basic " + token}, 401, "refused: wrong token (send \"Authorization: Bearer TOKEN\" with the token of http.token_file)\n"},
		{"prefix of the token", map[string]string{"Authorization": "Bearer " + token[:16]}, 401, "refused: wrong token (send \"Authorization: Bearer TOKEN\" with the token of http.token_file)\n"},
		{"cross-origin with the token", map[string]string{"Authorization": "Bearer " + token, "Origin": "http://evil.example"}, 403,
			"refused: cross-origin request (cross-origin request detected, and/or browser is out of date: Sec-Fetch-Site is missing, and Origin does not match Host)\n"},
	} {
		code, body := request(t, "POST", base+"/run/stop", tc.hdr)
		if code != tc.code || body != tc.body {
			t.Errorf("%s: %d %q, want %d %q", tc.name, code, body, tc.code, tc.body)
		}
	}
	if n := f.stops.Load(); n != 0 {
		t.Fatalf("%d stops after refused requests", n)
	}
	if code, _ := request(t, "POST", base+"/run/stop", map[string]string{"Authorization": "Bearer " + token}); code != http.StatusAccepted || f.stops.Load() != 1 {
		t.Fatalf("POST /run/stop with the token: %d, %d stops", code, f.stops.Load())
	}
	var msgs []string
	for _, r := range logs.records(t) {
		if strings.HasPrefix(r["msg"].(string), "POST /run/stop") {
			msgs = append(msgs, r["level"].(string)+" "+r["msg"].(string))
		}
	}
	if got := strings.Join(msgs, "; "); got != "WARN POST /run/stop refused: no token; WARN POST /run/stop refused: wrong token; "+
		"WARN POST /run/stop refused: wrong token; WARN POST /run/stop refused: wrong token; "+
		"WARN POST /run/stop refused: cross-origin request; INFO POST /run/stop: drain requested" {
		t.Errorf("logged: %s", got)
	}

	code, body := get(t, base+"/status")
	if code != 200 {
		t.Fatalf("/status %d", code)
	}
	for _, path := range []string{"./data", "bin/plugins", "/data/runs"} {
		if strings.Contains(body, path) {
			t.Errorf("/status off loopback shows %q:\n%s", path, body)
		}
	}
	var st struct {
		PathsHidden bool           `json:"paths_hidden"`
		Store       StoreStatus    `json:"store"`
		Plugins     []PluginStatus `json:"plugins"`
		Inputs      []InputStatus  `json:"inputs"`
		Ledger      Ledger         `json:"ledger"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if !st.PathsHidden || st.Store.Path != "" || st.Plugins[0].Binary != "gec" || st.Plugins[0].Plugin != "gec" || st.Inputs[1].URI != "file://run7.mfp" ||
		st.Ledger.InputLosses["file://run7.mfp/decode"] != 2 || st.Ledger.InputLosses["udp://127.0.0.1:9000/lost"] != 3 {
		t.Errorf("/status off loopback: %s", body)
	}
	// The fake's own status is untouched (withoutPaths copies).
	if s := f.Status(); s.Plugins[0].Binary != "bin/plugins/gec" {
		t.Errorf("fake status changed: %+v", s.Plugins)
	}
}

// TestStatusShowsPaths: on loopback, or off it with http.show_paths,
// /status names the store, plugins and file inputs.
func TestStatusShowsPaths(t *testing.T) {
	f := &fakeControl{}
	for _, b := range []string{
		startTestHTTP(t, f),
		startAccessHTTP(t, f, "0.0.0.0:0", httpAccess{Token: "0123456789abcdef", ShowPaths: true}, slog.New(slog.DiscardHandler)),
	} {
		code, body := get(t, b+"/status")
		if code != 200 || strings.Contains(body, "paths_hidden") {
			t.Fatalf("/status: %d %s", code, body)
		}
		for _, path := range []string{`"path": "./data"`, `"binary": "bin/plugins/gec"`, `"uri": "file:///data/runs/run7.mfp"`, `"file:///data/runs/run7.mfp/decode": 2`} {
			if !strings.Contains(body, path) {
				t.Errorf("/status lacks %s:\n%s", path, body)
			}
		}
	}
}

// TestNodeHidesPathsOffLoopback: a node listening on every interface
// shows no file path in /status or /metrics (a file:// input, the store
// directory), and a node without a token refuses to listen there at all.
func TestNodeHidesPathsOffLoopback(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.HTTP.Address = "0.0.0.0:0"
	if _, _, err := runNode(t, cfg, &Parts{Inputs: []transport.Input{&fakeInput{sources: []uint32{0}}}, Chain: &fakeChain{}}, nil); err == nil ||
		!strings.Contains(err.Error(), "http: 0.0.0.0:0 is not a loopback address and no token is set (http.token_file)") {
		t.Fatalf("a node off loopback without a token started: %v", err)
	}

	cfg = testConfig(t, 1)
	cfg.Sources = []config.SourceGroup{{Name: "a", Sources: "0"}}
	cfg.Inputs[0].URI = "file:///srv/daq/secret/run7.mfp"
	cfg.HTTP.Address = "0.0.0.0:0"
	cfg.HTTP.TokenFile = filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(cfg.HTTP.TokenFile, []byte("0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var bodies []string
	l, _, err := runNode(t, cfg, &Parts{Inputs: []transport.Input{&fakeInput{sources: []uint32{0}}}, Finite: []bool{false}, Chain: &fakeChain{}}, func(n *Node) {
		for n.Status().Ledger.EventsStored < 10 {
			time.Sleep(5 * time.Millisecond)
		}
		_, port, _ := net.SplitHostPort(n.HTTPAddr())
		for _, p := range []string{"/status", "/metrics"} {
			_, body := get(t, "http://127.0.0.1:"+port+p)
			bodies = append(bodies, body)
		}
		n.Stop()
	})
	if err != nil || !l.Balanced {
		t.Fatal(err, l)
	}
	for i, body := range bodies {
		for _, path := range []string{"/srv/daq", cfg.Store.Dir} {
			if strings.Contains(body, path) {
				t.Errorf("%s shows %q:\n%s", []string{"/status", "/metrics"}[i], path, body)
			}
		}
	}
	if !strings.Contains(bodies[0], `"uri": "file://run7.mfp"`) || !strings.Contains(bodies[1], `sluice_input_packets_total{input="file://run7.mfp"}`) {
		t.Errorf("the input is not named by its file name:\n%s\n%s", bodies[0], bodies[1])
	}
}
