package control

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// promContentType is the Content-Type check of Prometheus's HTTP service
// discovery (discovery/http/http.go of github.com/prometheus/prometheus
// v0.316.0, matchContentType): a response with any other type is refused.
// That module is not a dependency (it would pull in most of Prometheus);
// its target group decoding is mirrored in promGroup below.
var promContentType = regexp.MustCompile(`^(?i:application\/json(;\s*charset=("utf-8"|utf-8))?)$`)

// promGroup decodes a target group as Prometheus's targetgroup.Group
// UnmarshalJSON does (same module, discovery/targetgroup): exactly the
// fields targets and labels (unknown fields refused), labels a
// model.LabelSet, whose names are checked on decoding.
type promGroup struct {
	Targets []string       `json:"targets"`
	Labels  model.LabelSet `json:"labels"`
}

// parsePromSD decodes an http_sd response body the way Prometheus does
// (the top level a JSON list of groups), and checks what a scrape then
// needs: every target host:port, label names of the legacy (strictest)
// scheme and valid UTF-8 values.
func parsePromSD(t *testing.T, body []byte) []promGroup {
	t.Helper()
	var raw []json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatalf("body is not a JSON list: %v\n%s", err, body)
	}
	if raw == nil {
		t.Fatalf("body is null, want a list: %s", body)
	}
	out := make([]promGroup, 0, len(raw))
	for i, r := range raw {
		var g promGroup
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&g); err != nil {
			t.Fatalf("group %d: %v\n%s", i, err, r)
		}
		for _, tg := range g.Targets {
			if _, port, err := net.SplitHostPort(tg); err != nil || port == "" || port == "0" {
				t.Fatalf("group %d: target %q is not host:port", i, tg)
			}
		}
		for ln, lv := range g.Labels {
			if !model.LegacyValidation.IsValidLabelName(string(ln)) || !lv.IsValid() {
				t.Fatalf("group %d: label %q=%q is not valid", i, ln, lv)
			}
		}
		out = append(out, g)
	}
	return out
}

// TestServiceDiscovery: the HTTP service-discovery endpoint lists every
// member with an HTTP endpoint, one group each with its labels, in the
// format Prometheus's http_sd_configs reads; a member without one is left
// out; a member that leaves is gone from the next answer.
func TestServiceDiscovery(t *testing.T) {
	ep := startEtcd(t)
	c := dial(t, ep)
	a, b := dial(t, ep), dial(t, ep)
	msA, err := a.Join(ctxT(t), Member{Node: "node-a", Roles: "ru,bu,em", Sources: "0-9", Address: "127.0.0.1:7000", HTTP: "127.0.0.1:9464"}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	msB, err := b.Join(ctxT(t), Member{Node: "node-b", Roles: "bu", Address: "127.0.0.1:7001", HTTP: "10.0.0.2:9464"}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Join(ctxT(t), Member{Node: "node-c", Roles: "ru", Sources: "10", Address: "127.0.0.1:7002"}, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Campaign(ctxT(t), msA); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(SDHandler(c, 5*time.Second, nil))
	defer srv.Close()
	get := func() []promGroup {
		t.Helper()
		resp, err := http.Get(srv.URL + "/sd")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		if ct := resp.Header.Get("Content-Type"); !promContentType.MatchString(strings.TrimSpace(ct)) {
			t.Fatalf("Content-Type %q: Prometheus refuses it", ct)
		}
		return parsePromSD(t, body)
	}
	gs := get()
	if len(gs) != 2 {
		t.Fatalf("%d groups, want 2 (node-c has no HTTP endpoint): %+v", len(gs), gs)
	}
	want := []struct {
		target string
		labels model.LabelSet
	}{
		{"127.0.0.1:9464", model.LabelSet{"farm": "test-farm", "node": "node-a", "roles": "ru,bu,em",
			"__meta_sluice_address": "127.0.0.1:7000", "__meta_sluice_sources": "0-9", "__meta_sluice_em": "true",
			"__meta_sluice_incarnation": model.LabelValue(strconv.FormatUint(msA.Incarnation(), 16))}},
		{"10.0.0.2:9464", model.LabelSet{"farm": "test-farm", "node": "node-b", "roles": "bu",
			"__meta_sluice_address": "127.0.0.1:7001", "__meta_sluice_sources": "", "__meta_sluice_em": "false",
			"__meta_sluice_incarnation": model.LabelValue(strconv.FormatUint(msB.Incarnation(), 16))}},
	}
	for i, w := range want {
		g := gs[i]
		if len(g.Targets) != 1 || g.Targets[0] != w.target || !g.Labels.Equal(w.labels) {
			t.Errorf("group %d: %+v, want targets [%s] labels %v", i, g, w.target, w.labels)
		}
	}
	if err := msB.Leave(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if gs := get(); len(gs) != 1 || gs[0].Labels["node"] != "node-a" {
		t.Fatalf("after node-b left: %+v", gs)
	}
	// Not a GET: refused; the list is the only resource.
	resp, err := http.Post(srv.URL+"/sd", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", resp.StatusCode)
	}
}

// TestServiceDiscoveryEmpty: a farm with no member is "[]", which
// Prometheus reads as no targets (null would be an error).
func TestServiceDiscoveryEmpty(t *testing.T) {
	c := dial(t, startEtcd(t))
	rec := httptest.NewRecorder()
	SDHandler(c, 5*time.Second, nil).ServeHTTP(rec, httptest.NewRequest("GET", "/sd", nil))
	if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != "[]" {
		t.Fatalf("%d %q", rec.Code, rec.Body.String())
	}
	if gs := parsePromSD(t, rec.Body.Bytes()); len(gs) != 0 {
		t.Fatal(gs)
	}
}
