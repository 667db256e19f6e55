package node

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// control is what the HTTP endpoints need from the node.
type control interface {
	Status() Status
	Stop() // request a drain
}

// httpAccess is who may use the HTTP endpoint and what it shows them.
//
// A web page the operator has open can make the browser send requests to
// the node (a cross-site "simple" POST needs no preflight), and a page on a
// name that resolves to 127.0.0.1 (DNS rebinding) can even read the
// answers. So POST /run/stop refuses every request the browser marks as
// cross-site or whose Origin is not the node, on loopback every request
// must be addressed to a loopback name, and off loopback POST /run/stop
// needs the token and /status names no file.
type httpAccess struct {
	// Token, when not "", is what POST /run/stop requires as
	// "Authorization: Bearer TOKEN".
	Token string
	// Loopback: the endpoint listens on a loopback address; requests must
	// name a loopback host (localhost, 127.0.0.1, [::1]) in Host.
	Loopback bool
	// ShowPaths: /status shows file paths (else withoutPaths).
	ShowPaths bool
}

// newHTTPHandler serves:
//
//	GET  /metrics  Prometheus text exposition of reg
//	GET  /status   Status as JSON
//	GET  /healthz  200 while the process serves (the node is alive)
//	GET  /readyz   200 while the run is in state running, 503 otherwise
//	POST /run/stop request a drain; 202, and the state moves to draining;
//	               403 for a cross-origin browser request, 401 without
//	               the token when one is required
//
// Every POST /run/stop is logged with who asked: remote address and user
// agent (at INFO when accepted, WARN when refused).
func newHTTPHandler(reg *prometheus.Registry, n control, acc httpAccess, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		s := n.Status()
		if !acc.ShowPaths {
			s = s.withoutPaths()
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(s)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if st := n.Status().State; st != StateRunning {
			http.Error(w, "not ready: "+st.String(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	cross := http.NewCrossOriginProtection()
	mux.HandleFunc("POST /run/stop", func(w http.ResponseWriter, r *http.Request) {
		who := []any{"remote", r.RemoteAddr, "user_agent", r.UserAgent()}
		if err := cross.Check(r); err != nil {
			log.Warn("POST /run/stop refused: cross-origin request", append(who, "origin", r.Header.Get("Origin"),
				"sec_fetch_site", r.Header.Get("Sec-Fetch-Site"), "host", r.Host, "err", err)...)
			http.Error(w, "refused: cross-origin request ("+err.Error()+")", http.StatusForbidden)
			return
		}
		if acc.Token != "" && !bearerIs(r, acc.Token) {
			reason := "no token"
			if r.Header.Get("Authorization") != "" {
				reason = "wrong token"
			}
			log.Warn("POST /run/stop refused: "+reason, who...)
			w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
			http.Error(w, "refused: "+reason+` (send "Authorization: Bearer TOKEN" with the token of http.token_file)`, http.StatusUnauthorized)
			return
		}
		log.Info("POST /run/stop: drain requested", who...)
		n.Stop()
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte("draining\n"))
	})
	if !acc.Loopback {
		return mux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			log.Warn("http request refused: Host is not a loopback name", "remote", r.RemoteAddr,
				"user_agent", r.UserAgent(), "host", r.Host, "method", r.Method, "path", r.URL.Path)
			http.Error(w, fmt.Sprintf("refused: Host %q is not a loopback name; this endpoint listens on loopback only", r.Host), http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// bearerIs reports whether r carries "Authorization: Bearer token",
// compared in constant time.
func bearerIs(r *http.Request, token string) bool {
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(token)) == 1
}

// loopbackHost reports whether a Host header ("HOST[:PORT]") names this
// machine's loopback: localhost or a loopback IP.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// httpServer is the node's HTTP endpoint, listening from start until
// shutdown.
type httpServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// startHTTP listens on addr (e.g. 127.0.0.1:9464; port 0 picks a free one)
// and serves h in the background. It refuses to serve on an address other
// than loopback when acc has no token, and when acc.Loopback claims a
// loopback address the listener does not have.
func startHTTP(addr string, acc httpAccess, h http.Handler, log *slog.Logger) (*httpServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	loop := false
	if ta, ok := ln.Addr().(*net.TCPAddr); ok {
		loop = ta.IP.IsLoopback()
	}
	switch {
	case acc.Loopback && !loop:
		_ = ln.Close()
		return nil, fmt.Errorf("%s listens on %s, which is not a loopback address: name a loopback IP such as 127.0.0.1", addr, ln.Addr())
	case !loop && acc.Token == "":
		_ = ln.Close()
		return nil, fmt.Errorf("%s is not a loopback address and no token is set (http.token_file): POST /run/stop would be open to the network", addr)
	}
	s := &httpServer{
		srv:  &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second},
		ln:   ln,
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", "err", err)
		}
	}()
	return s, nil
}

// Addr is the address actually listened on.
func (s *httpServer) Addr() string { return s.ln.Addr().String() }

// shutdown stops accepting requests and waits up to 2 s for those in flight.
func (s *httpServer) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	<-s.done
}
