package fill

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/farm/control"
)

func TestHTTPSource(t *testing.T) {
	var mu sync.Mutex
	body, code := `{"mode": "STABLE BEAMS", "fill": 9001, "since": "2026-12-01T08:00:00Z", "until": "2026-12-01T20:00:00Z", "next_fill": "2026-12-01T22:00:00Z"}`, 200
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	set := func(b string, c int) {
		mu.Lock()
		body, code = b, c
		mu.Unlock()
	}
	src := NewHTTP(srv.URL, 2*time.Second)
	defer src.Close()
	st, err := src.State(t.Context(), t0)
	want := State{Mode: StableBeams, Fill: 9001, Since: at("2026-12-01T08:00:00Z"), Until: at("2026-12-01T20:00:00Z"), NextFill: at("2026-12-01T22:00:00Z")}
	if err != nil || !st.Since.Equal(want.Since) || !st.Until.Equal(want.Until) || !st.NextFill.Equal(want.NextFill) || st.Mode != want.Mode || st.Fill != want.Fill {
		t.Fatalf("%+v %v", st, err)
	}
	set(`{"mode": "beam dump"}`, 200)
	if st, err := src.State(t.Context(), t0); err != nil || st != (State{Mode: BeamDump}) {
		t.Fatalf("%+v %v", st, err)
	}
	for _, c := range []struct {
		body string
		code int
		want string
	}{
		{`{"mode": "STABLE BEAMS"}`, 503, "HTTP 503"},
		{`{"mode": "ON"}`, 200, `unknown beam mode "ON"`},
		{`{"mode": "NO BEAM", "untill": "x"}`, 200, `unknown field "untill"`},
		{`<html>`, 200, "invalid character"},
		{strings.Repeat(" ", maxDocument+1), 200, "longer than"},
	} {
		set(c.body, c.code)
		if _, err := src.State(t.Context(), t0); !errors.Is(err, ErrSource) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), srv.URL) {
			t.Errorf("%.40q (HTTP %d): %v, want ErrSource naming the URL and %q", c.body, c.code, err, c.want)
		}
	}
	srv.Close()
	if _, err := src.State(t.Context(), t0); !errors.Is(err, ErrSource) {
		t.Fatalf("server gone: %v", err)
	}
}

func TestEtcdSource(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded etcd")
	}
	s, err := control.StartServer(control.ServerConfig{DataDir: t.TempDir(), Listen: "http://127.0.0.1:0", Peer: "http://127.0.0.1:0", TickMs: 20, ElectionMs: 200})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	src, err := NewEtcd([]string{s.Endpoint()}, "/lhc/beam", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if st, err := src.State(t.Context(), t0); err != nil || st.Known() {
		t.Fatalf("no key: %+v %v, want an unknown state", st, err)
	}
	cli, err := control.Dial(t.Context(), control.Config{Endpoints: []string{s.Endpoint()}, Farm: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	put := func(v string) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if _, err := cli.Etcd().Put(ctx, "/lhc/beam", v); err != nil {
			t.Fatal(err)
		}
	}
	put("STABLE BEAMS")
	if st, err := src.State(t.Context(), t0); err != nil || st != (State{Mode: StableBeams}) {
		t.Fatalf("bare mode: %+v %v", st, err)
	}
	put(`{"mode": "NO BEAM", "fill": 9002, "next_fill": "2026-12-01T22:00:00Z"}`)
	if st, err := src.State(t.Context(), t0); err != nil || st.Mode != NoBeam || st.Fill != 9002 || !st.NextFill.Equal(at("2026-12-01T22:00:00Z")) {
		t.Fatalf("document: %+v %v", st, err)
	}
	put("BEAMS ON")
	if _, err := src.State(t.Context(), t0); !errors.Is(err, ErrSource) || !strings.Contains(err.Error(), "/lhc/beam") {
		t.Fatalf("bad mode: %v", err)
	}
	if src.Describe() != "etcd /lhc/beam" {
		t.Fatal(src.Describe())
	}
}
