package storeflight

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/sluice-daq/sluice/storage"
)

// Server serves one store.
type Server struct {
	store   *storage.Store
	srv     *grpc.Server
	log     *slog.Logger
	grace   time.Duration
	uri     string
	file    string // the EndpointFile written
	refused atomic.Uint64
	calls   atomic.Int64  // calls whose handler runs
	conns   atomic.Int64  // client connections open
	cut     atomic.Uint64 // connections Close cut after the grace period
	errc    chan error
	once    sync.Once
	err     error
}

// Serve starts serving store as cfg says and writes the EndpointFile.
// Errors: a listen address that is taken or invalid, unreadable TLS or
// token files, an endpoint file that cannot be written.
func Serve(store *storage.Store, cfg Config, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if ps := cfg.Validate(); len(ps) > 0 {
		return nil, fmt.Errorf("flight: %s", ps.String())
	}
	s := &Server{store: store, log: log, grace: cfg.CloseGrace, errc: make(chan error, 1)}
	if s.grace == 0 {
		s.grace = DefaultCloseGrace
	}
	// Stop waits for the handlers it cancels (a DoGet between two batches
	// reads the store, which closes after this server).
	opts := []grpc.ServerOption{grpc.WaitForHandlers(true), grpc.StatsHandler(connCounter{&s.conns})}
	scheme := "grpc"
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("flight: tls: %w", err)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})))
		scheme = "grpc+tls"
	}
	// Every call is counted while it runs, so that Close can say how many
	// it cut.
	unary := []grpc.UnaryServerInterceptor{func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		s.calls.Add(1)
		defer s.calls.Add(-1)
		return h(ctx, req)
	}}
	stream := []grpc.StreamServerInterceptor{func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		s.calls.Add(1)
		defer s.calls.Add(-1)
		return h(srv, ss)
	}}
	if cfg.TokenFile != "" {
		tok, err := readToken(cfg.TokenFile)
		if err != nil {
			return nil, err
		}
		check := func(ctx context.Context) error {
			md, _ := metadata.FromIncomingContext(ctx)
			for _, v := range md.Get("authorization") {
				if got, ok := strings.CutPrefix(v, "Bearer "); ok && subtle.ConstantTimeCompare([]byte(got), []byte(tok)) == 1 {
					return nil
				}
			}
			s.refused.Add(1)
			return status.Error(codes.Unauthenticated, "flight: a valid token is required (authorization: Bearer TOKEN)")
		}
		unary = append(unary, func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := check(ctx); err != nil {
				return nil, err
			}
			return h(ctx, req)
		})
		stream = append(stream, func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := check(ss.Context()); err != nil {
				return err
			}
			return h(srv, ss)
		})
	}
	// A grpc server of our own (flight.Server only stops gracefully,
	// which a client holding a stream open would make last forever).
	s.srv = grpc.NewServer(append(opts, grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(stream...))...)
	flight.RegisterFlightServiceServer(s.srv, &service{s: s})
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("flight: listen %s: %w", cfg.Listen, err)
	}
	addr := lis.Addr().String()
	if host, port, err := net.SplitHostPort(addr); err == nil && (host == "::" || host == "0.0.0.0") {
		h, _ := os.Hostname()
		addr = net.JoinHostPort(h, port)
	}
	s.uri = scheme + "://" + addr
	go func() { s.errc <- s.srv.Serve(lis) }()
	body := s.uri + "\n"
	for _, kv := range [][2]string{{"token_file", cfg.TokenFile}, {"tls_cert", cfg.TLSCert}} {
		if kv[1] != "" {
			abs, _ := filepath.Abs(kv[1])
			body += kv[0] + " " + abs + "\n"
		}
	}
	s.file = filepath.Join(store.Dir(), EndpointFile)
	if err := os.WriteFile(s.file, []byte(body), 0o644); err != nil {
		s.srv.Stop()
		<-s.errc
		return nil, fmt.Errorf("flight: %w", err)
	}
	log.Info("store served over Arrow Flight", "endpoint", s.uri, "token", cfg.TokenFile != "")
	return s, nil
}

// URI is the endpoint, grpc://HOST:PORT or grpc+tls://HOST:PORT.
func (s *Server) URI() string { return s.uri }

// Refused is the calls refused for want of a valid token.
func (s *Server) Refused() uint64 { return s.refused.Load() }

// Cut is the client connections Close cut after Config.CloseGrace: each
// had a call running or a response not yet read whole (its client gets
// an error, not the end of the stream).
func (s *Server) Cut() uint64 { return s.cut.Load() }

// Close removes the EndpointFile, refuses new calls and lets the calls in
// progress end for Config.CloseGrace; then it cuts the connections still
// open (counted in Cut, logged) and returns once every handler has
// returned, so a client holding a stream open (a DoGet it stopped
// reading) delays the node's end by the grace period at most. Closing
// again returns the first Close's result.
func (s *Server) Close() error {
	s.once.Do(func() {
		_ = os.Remove(s.file)
		graceful := make(chan struct{})
		go func() {
			s.srv.GracefulStop()
			close(graceful)
		}()
		t := time.NewTimer(s.grace)
		select {
		case <-graceful:
			t.Stop()
		case <-t.C:
			n := max(s.conns.Load(), 1) // graceful stop waits for one at least
			s.cut.Add(uint64(n))
			s.log.Warn("flight: clients still reading after the close grace period; cutting their connections",
				"connections", n, "calls_running", s.calls.Load(), "grace", s.grace)
			s.srv.Stop()
			<-graceful
		}
		if err := <-s.errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.err = err
		}
	})
	return s.err
}

// connCounter counts a server's open client connections.
type connCounter struct{ n *atomic.Int64 }

func (c connCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (c connCounter) HandleRPC(context.Context, stats.RPCStats)                         {}
func (c connCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (c connCounter) HandleConn(_ context.Context, st stats.ConnStats) {
	switch st.(type) {
	case *stats.ConnBegin:
		c.n.Add(1)
	case *stats.ConnEnd:
		c.n.Add(-1)
	}
}

func readToken(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("flight: token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("flight: token file %s is empty", file)
	}
	return tok, nil
}

// service is the Flight service of one store.
type service struct {
	flight.BaseFlightServer
	s *Server
}

func (v *service) ListFlights(_ *flight.Criteria, fs flight.FlightService_ListFlightsServer) error {
	st, err := v.s.store.Stats()
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	for _, ss := range st.Streams {
		var schema *arrow.Schema
		_, err := v.s.store.ExportBatches(ss.Stream, storage.ExportOptions{Limit: 1}, func(sc *arrow.Schema) error {
			schema = sc
			return errStop
		}, func(arrow.RecordBatch) error { return nil })
		if err != nil && !errors.Is(err, errStop) {
			continue // no schema yet: nothing to list
		}
		q := QueryOf(ss.Stream, storage.Selection{}, 0)
		info := &flight.FlightInfo{
			Schema:           flight.SerializeSchema(schema, memory.DefaultAllocator),
			FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{ss.Stream.String()}},
			Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: q.Encode()}}},
			TotalRecords:     int64(ss.Events),
			TotalBytes:       -1,
		}
		if err := fs.Send(info); err != nil {
			return err
		}
	}
	return nil
}

var errStop = errors.New("stop")

func (v *service) DoGet(tkt *flight.Ticket, fs flight.FlightService_DoGetServer) error {
	q, stream, sel, err := ParseQuery(tkt.GetTicket())
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	var w *flight.Writer
	_, err = v.s.store.ExportBatches(stream, storage.ExportOptions{Selection: sel, Limit: q.Limit}, func(schema *arrow.Schema) error {
		w = flight.NewRecordWriter(fs, ipc.WithSchema(schema))
		return nil
	}, func(rec arrow.RecordBatch) error {
		return w.Write(rec)
	})
	if w != nil {
		if cerr := w.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	return nil
}

func (v *service) ListActions(_ *flight.Empty, fs flight.FlightService_ListActionsServer) error {
	for _, a := range []*flight.ActionType{
		{Type: ActionStat, Description: "the store's statistics (storage.Stats as JSON)"},
		{Type: ActionList, Description: "the events a Query selects (one storage.EventInfo as JSON per result; limit required)"},
		{Type: ActionLines, Description: "the trigger line names by stage (JSON object of stage to names, bit order)"},
		{Type: ActionWhy, Description: "one event's provenance (storage.Why as JSON; body {\"version\":1,\"run\":R,\"event\":E})"},
	} {
		if err := fs.Send(a); err != nil {
			return err
		}
	}
	return nil
}

func (v *service) DoAction(a *flight.Action, fs flight.FlightService_DoActionServer) error {
	switch a.GetType() {
	case ActionStat:
		st, err := v.s.store.Stats()
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		b, err := json.Marshal(st)
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		return fs.Send(&flight.Result{Body: b})
	case ActionLines:
		names, err := v.s.store.LineNames()
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		b, err := json.Marshal(names)
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		return fs.Send(&flight.Result{Body: b})
	case ActionWhy:
		var q WhyQuery
		if err := json.Unmarshal(a.GetBody(), &q); err != nil || q.Version != Version {
			return status.Errorf(codes.InvalidArgument, "flight: why: want {\"version\":%d,\"run\":R,\"event\":E} (%v)", Version, err)
		}
		w, err := v.s.store.Why(q.Run, q.Event)
		if errors.Is(err, storage.ErrNoEvent) {
			return status.Error(codes.NotFound, err.Error())
		}
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		b, err := json.Marshal(w)
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		return fs.Send(&flight.Result{Body: b})
	case ActionList:
		q, stream, sel, err := ParseQuery(a.GetBody())
		if err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		if q.Limit < 1 || q.Limit > MaxList {
			return status.Errorf(codes.InvalidArgument, "flight: ls: limit %d: want 1..%d", q.Limit, MaxList)
		}
		var serr error
		err = v.s.store.List(stream, sel, q.Limit, func(e storage.EventInfo) bool {
			b, err := json.Marshal(e)
			if err == nil {
				err = fs.Send(&flight.Result{Body: b})
			}
			serr = err
			return err == nil
		})
		if err == nil {
			err = serr
		}
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		return nil
	}
	return status.Errorf(codes.InvalidArgument, "flight: unknown action %q (want %s, %s, %s or %s)", a.GetType(), ActionStat, ActionList, ActionLines, ActionWhy)
}
