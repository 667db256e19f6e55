package fill

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdSource reads the state from one etcd key holding a Document (or a
// bare mode), e.g. written by the farm's run control from the
// accelerator's own feed. A missing key is an unknown state, not an error.
type etcdSource struct {
	cli     *clientv3.Client
	key     string
	timeout time.Duration
}

// NewEtcd is a source reading key from the etcd at endpoints, each read
// bounded by timeout. It does not wait for etcd: a read that fails is
// reported like any source error.
func NewEtcd(endpoints []string, key string, timeout time.Duration) (Source, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: timeout, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("%w: etcd %v: %w", ErrSource, endpoints, err)
	}
	return &etcdSource{cli: cli, key: key, timeout: timeout}, nil
}

func (e *etcdSource) State(ctx context.Context, _ time.Time) (State, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	resp, err := e.cli.Get(ctx, e.key)
	if err != nil {
		return State{}, fmt.Errorf("%w: etcd key %s: %w", ErrSource, e.key, err)
	}
	if len(resp.Kvs) == 0 {
		return State{}, nil
	}
	v := strings.TrimSpace(string(resp.Kvs[0].Value))
	if !strings.HasPrefix(v, "{") {
		m, err := ParseMode(v)
		if err != nil {
			return State{}, fmt.Errorf("%w: etcd key %s: %w", ErrSource, e.key, err)
		}
		return State{Mode: m}, nil
	}
	st, err := parseDocument([]byte(v))
	if err != nil {
		return State{}, fmt.Errorf("etcd key %s: %w", e.key, err)
	}
	return st, nil
}

func (e *etcdSource) Describe() string { return "etcd " + e.key }
func (e *etcdSource) Close() error     { return e.cli.Close() }
