package node

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// control is what the HTTP endpoints need from the node.
type control interface {
	Status() Status
	Stop() // request a drain
}

// newHTTPHandler serves:
//
//	GET  /metrics  Prometheus text exposition of reg
//	GET  /status   Status as JSON
//	GET  /healthz  200 while the process serves (the node is alive)
//	GET  /readyz   200 while the run is in state running, 503 otherwise
//	POST /run/stop request a drain; 202, and the state moves to draining
func newHTTPHandler(reg *prometheus.Registry, n control) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(n.Status())
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
	mux.HandleFunc("POST /run/stop", func(w http.ResponseWriter, _ *http.Request) {
		n.Stop()
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte("draining\n"))
	})
	return mux
}

// httpServer is the node's HTTP endpoint, listening from start until
// shutdown.
type httpServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// startHTTP listens on addr (e.g. 127.0.0.1:9464; port 0 picks a free one)
// and serves h in the background.
func startHTTP(addr string, h http.Handler, log *slog.Logger) (*httpServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
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
