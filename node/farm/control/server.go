package control

import (
	"fmt"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// ServerConfig configures an embedded single-member etcd server (`sluice
// farm etcd`, tests and demos). Production farms point nodes at their
// own etcd cluster instead.
type ServerConfig struct {
	Name    string // member name (default "sluice")
	DataDir string // required
	// Listen is the client URL (default http://127.0.0.1:2379; port 0
	// picks a free one, see Server.Endpoint).
	Listen string
	// Peer is the peer URL (default http://127.0.0.1:2380; port 0 allowed).
	Peer string
	// TickMs and ElectionMs are etcd's heartbeat and election timeouts
	// (defaults 100 and 1000). The minimum lease TTL is ceil(1.5 ×
	// ElectionMs): tests shorten them to make leases expire sooner.
	TickMs, ElectionMs uint
	// Logger receives etcd's logs (nil: none; etcd logs "server closed" at
	// level error on every clean Close).
	Logger *zap.Logger
	// ReadyTimeout bounds the wait for the server to serve (default 30s).
	ReadyTimeout time.Duration
}

// Server is a running embedded etcd.
type Server struct {
	e *embed.Etcd
}

// StartServer starts an embedded etcd and waits until it serves.
func StartServer(cfg ServerConfig) (*Server, error) {
	if cfg.DataDir == "" {
		return nil, fmt.Errorf("control: etcd server: no data directory")
	}
	ec := embed.NewConfig()
	if cfg.Name != "" {
		ec.Name = cfg.Name
	} else {
		ec.Name = "sluice"
	}
	ec.Dir = cfg.DataDir
	listen, peer := cfg.Listen, cfg.Peer
	if listen == "" {
		listen = "http://127.0.0.1:2379"
	}
	if peer == "" {
		peer = "http://127.0.0.1:2380"
	}
	lu, err := url.Parse(listen)
	if err != nil || lu.Host == "" {
		return nil, fmt.Errorf("control: etcd listen URL %q: want http://host:port", listen)
	}
	pu, err := url.Parse(peer)
	if err != nil || pu.Host == "" {
		return nil, fmt.Errorf("control: etcd peer URL %q: want http://host:port", peer)
	}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{*lu}, []url.URL{*lu}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	ec.InitialCluster = ec.Name + "=" + pu.String()
	if cfg.TickMs != 0 {
		ec.TickMs = cfg.TickMs
	}
	if cfg.ElectionMs != 0 {
		ec.ElectionMs = cfg.ElectionMs
	}
	logger := cfg.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logger)
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("control: etcd server: %w", err)
	}
	wait := cfg.ReadyTimeout
	if wait == 0 {
		wait = 30 * time.Second
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("control: etcd server: %w", err)
	case <-time.After(wait):
		e.Close()
		return nil, fmt.Errorf("control: etcd server not ready after %v", wait)
	}
	return &Server{e: e}, nil
}

// Endpoint is the address clients dial (host:port, the real port when
// Listen asked for port 0).
func (s *Server) Endpoint() string { return s.e.Clients[0].Addr().String() }

// Err reports a fatal server error (the channel of embed.Etcd).
func (s *Server) Err() <-chan error { return s.e.Err() }

// Close stops the server.
func (s *Server) Close() { s.e.Close() }
