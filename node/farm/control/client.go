package control

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"path"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Sentinel errors (test with errors.Is; the wrapping error says more).
var (
	// ErrMemberExists: a live incarnation of this node id is registered;
	// it must leave or be fenced first.
	ErrMemberExists = errors.New("control: node id already registered")
	// ErrNotLeader: this EM's election key is gone or newer (deposed).
	ErrNotLeader = errors.New("control: not the event manager any more")
	// ErrNoRunConfig: the run has no configuration in etcd.
	ErrNoRunConfig = errors.New("control: no run configuration")
	// ErrBadFarmID: a farm id that cannot be part of a key.
	ErrBadFarmID = errors.New("control: bad farm id")
	// ErrNotMember: the node named is not a member of the farm.
	ErrNotMember = errors.New("control: not a member")
)

// Config says how to reach etcd.
type Config struct {
	Endpoints   []string      // host:port or URLs
	Farm        string        // farm id: [A-Za-z0-9._-], 1..64 bytes
	DialTimeout time.Duration // default 5s
	TLS         *tls.Config   // nil: plain
	Username    string
	Password    string
}

// Client is one farm's view of etcd. Safe for concurrent use.
type Client struct {
	cli    *clientv3.Client
	farm   string
	prefix string // "/sluice/<farm>/"
	own    bool   // Close closes cli
}

// CheckFarmID validates a farm id.
func CheckFarmID(farm string) error {
	if len(farm) == 0 || len(farm) > 64 {
		return fmt.Errorf("%w: %q: want 1..64 bytes", ErrBadFarmID, farm)
	}
	for _, c := range farm {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q: only letters, digits, '.', '_' and '-'", ErrBadFarmID, farm)
		}
	}
	return nil
}

// Dial connects to etcd. It fails if no endpoint answers within the dial
// timeout.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	if err := CheckFarmID(cfg.Farm); err != nil {
		return nil, err
	}
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("control: no etcd endpoint")
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, DialTimeout: cfg.DialTimeout, TLS: cfg.TLS,
		Username: cfg.Username, Password: cfg.Password, Context: ctx, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("control: etcd %v: %w", cfg.Endpoints, err)
	}
	// clientv3.New does not wait for a connection: ask something.
	sctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if _, err := cli.Status(sctx, cfg.Endpoints[0]); err != nil {
		cli.Close()
		return nil, fmt.Errorf("control: etcd %v does not answer: %w", cfg.Endpoints, err)
	}
	return &Client{cli: cli, farm: cfg.Farm, prefix: "/sluice/" + cfg.Farm + "/", own: true}, nil
}

// New wraps an existing etcd client for farm (Close leaves cli open).
func New(cli *clientv3.Client, farm string) (*Client, error) {
	if err := CheckFarmID(farm); err != nil {
		return nil, err
	}
	return &Client{cli: cli, farm: farm, prefix: "/sluice/" + farm + "/"}, nil
}

// Farm is the farm id.
func (c *Client) Farm() string { return c.farm }

// Etcd is the underlying etcd client.
func (c *Client) Etcd() *clientv3.Client { return c.cli }

// Close closes the connection if Dial opened it.
func (c *Client) Close() error {
	if c.own {
		return c.cli.Close()
	}
	return nil
}

func (c *Client) key(parts ...string) string { return c.prefix + path.Join(parts...) }

func (c *Client) nodesPrefix() string { return c.prefix + "nodes/" }
func (c *Client) emPrefix() string    { return c.prefix + "em/" }
func (c *Client) runKey() string      { return c.prefix + "run" }
func (c *Client) reservedKey() string { return c.prefix + "reserved" }
func (c *Client) runConfigKey(run uint32) string {
	return c.key("runs", strconv.FormatUint(uint64(run), 10), "config")
}
func (c *Client) ledgerKey(run uint32) string {
	return c.key("runs", strconv.FormatUint(uint64(run), 10), "ledger")
}
