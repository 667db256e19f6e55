package control

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-daq/sluice/node/farm"
)

// Run states an operator asks for.
const (
	StateRunning = "running"
	StateStopped = "stopped"
)

// RunState is the farm's desired run state (the run key): every node
// watches it and walks its own state machine towards it.
type RunState struct {
	State string    `json:"state"` // running or stopped
	Run   uint32    `json:"run"`
	Since time.Time `json:"since"`
	By    string    `json:"by,omitempty"` // who asked (user@host)
	// Revision is the key's mod revision (set by reads).
	Revision int64 `json:"revision,omitempty"`
}

// PutRunConfig stores cfg as its run's configuration, once: if the run
// already has one, it must be the same (Diff), else the error wraps
// farm.ErrConfigMismatch and names the differences. It returns the
// record's version (1 when this call created it).
func (c *Client) PutRunConfig(ctx context.Context, cfg farm.RunConfig) (int64, error) {
	if err := cfg.Validate(); err != nil {
		return 0, err
	}
	val, err := json.Marshal(cfg)
	if err != nil {
		return 0, err
	}
	key := c.runConfigKey(cfg.Run)
	resp, err := c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val))).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return 0, fmt.Errorf("control: run %d configuration: %w", cfg.Run, err)
	}
	if resp.Succeeded {
		return 1, nil
	}
	kv := resp.Responses[0].GetResponseRange().Kvs[0]
	var have farm.RunConfig
	if err := json.Unmarshal(kv.Value, &have); err != nil {
		return 0, fmt.Errorf("control: %s: %w", key, err)
	}
	if err := farm.Mismatch(have, cfg); err != nil {
		return 0, err
	}
	return kv.Version, nil
}

// RunConfig returns run's configuration and its version. Errors:
// ErrNoRunConfig, etcd's, a record that does not decode.
func (c *Client) RunConfig(ctx context.Context, run uint32) (farm.RunConfig, int64, error) {
	key := c.runConfigKey(run)
	resp, err := c.cli.Get(ctx, key)
	if err != nil {
		return farm.RunConfig{}, 0, fmt.Errorf("control: run %d configuration: %w", run, err)
	}
	if len(resp.Kvs) == 0 {
		return farm.RunConfig{}, 0, fmt.Errorf("%w for run %d (%s)", ErrNoRunConfig, run, key)
	}
	var cfg farm.RunConfig
	if err := json.Unmarshal(resp.Kvs[0].Value, &cfg); err != nil {
		return farm.RunConfig{}, 0, fmt.Errorf("control: %s: %w", key, err)
	}
	return cfg, resp.Kvs[0].Version, nil
}

// CheckRun is a node's admission to a run: its own view mine must equal
// the farm's record. Errors: ErrNoRunConfig, or farm.ErrConfigMismatch
// naming each difference (the node must refuse to join).
func (c *Client) CheckRun(ctx context.Context, mine farm.RunConfig) error {
	have, _, err := c.RunConfig(ctx, mine.Run)
	if err != nil {
		return err
	}
	return farm.Mismatch(have, mine)
}

// SetRunState writes the desired run state and returns its revision.
func (c *Client) SetRunState(ctx context.Context, st RunState) (int64, error) {
	if st.State != StateRunning && st.State != StateStopped {
		return 0, fmt.Errorf("control: run state %q: want %s or %s", st.State, StateRunning, StateStopped)
	}
	if st.Since.IsZero() {
		st.Since = time.Now().UTC()
	}
	val, err := json.Marshal(st)
	if err != nil {
		return 0, err
	}
	resp, err := c.cli.Put(ctx, c.runKey(), string(val))
	if err != nil {
		return 0, fmt.Errorf("control: set run state: %w", err)
	}
	return resp.Header.Revision, nil
}

// RunState returns the desired run state (ok false: never set).
func (c *Client) RunState(ctx context.Context) (RunState, bool, error) {
	resp, err := c.cli.Get(ctx, c.runKey())
	if err != nil {
		return RunState{}, false, fmt.Errorf("control: run state: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return RunState{}, false, nil
	}
	st, err := decodeRunState(resp.Kvs[0])
	return st, err == nil, err
}

func decodeRunState(kv interface {
	GetValue() []byte
	GetModRevision() int64
}) (RunState, error) {
	var st RunState
	if err := json.Unmarshal(kv.GetValue(), &st); err != nil {
		return RunState{}, fmt.Errorf("control: run state record: %w", err)
	}
	st.Revision = kv.GetModRevision()
	return st, nil
}

// WatchRunState sends the current desired run state (if set), then every
// change, until ctx ends. A failed watch sends a RunState-less error on
// errc and closes both channels.
func (c *Client) WatchRunState(ctx context.Context) (<-chan RunState, <-chan error) {
	out := make(chan RunState, 4)
	errc := make(chan error, 1)
	go func() {
		defer close(out)
		defer close(errc)
		resp, err := c.cli.Get(ctx, c.runKey())
		if err != nil {
			errc <- fmt.Errorf("control: run state: %w", err)
			return
		}
		send := func(st RunState) bool {
			select {
			case out <- st:
				return true
			case <-ctx.Done():
				return false
			}
		}
		if len(resp.Kvs) > 0 {
			st, err := decodeRunState(resp.Kvs[0])
			if err != nil {
				errc <- err
				return
			}
			if !send(st) {
				return
			}
		}
		wch := c.cli.Watch(clientv3.WithRequireLeader(ctx), c.runKey(), clientv3.WithRev(resp.Header.Revision+1))
		for wr := range wch {
			if err := wr.Err(); err != nil {
				errc <- fmt.Errorf("control: watch run state: %w", err)
				return
			}
			for _, ev := range wr.Events {
				if ev.Type != clientv3.EventTypePut {
					continue
				}
				st, err := decodeRunState(ev.Kv)
				if err != nil {
					errc <- err
					return
				}
				if !send(st) {
					return
				}
			}
		}
	}()
	return out, errc
}

// PutLedger publishes the EM's farm ledger of run (for `sluice farm
// status`), only while l leads.
func (l *Leadership) PutLedger(ctx context.Context, run uint32, s farm.LedgerSummary) error {
	val, err := json.Marshal(s)
	if err != nil {
		return err
	}
	resp, err := l.c.cli.Txn(ctx).If(l.isLeader()).Then(clientv3.OpPut(l.c.ledgerKey(run), string(val))).Commit()
	if err != nil {
		return fmt.Errorf("control: put ledger: %w", err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: %s (epoch %d)", ErrNotLeader, l.node, l.epoch)
	}
	return nil
}

// Ledger returns run's published farm ledger (ok false: none yet).
func (c *Client) Ledger(ctx context.Context, run uint32) (farm.LedgerSummary, bool, error) {
	resp, err := c.cli.Get(ctx, c.ledgerKey(run))
	if err != nil {
		return farm.LedgerSummary{}, false, fmt.Errorf("control: ledger: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return farm.LedgerSummary{}, false, nil
	}
	var s farm.LedgerSummary
	if err := json.Unmarshal(resp.Kvs[0].Value, &s); err != nil {
		return farm.LedgerSummary{}, false, fmt.Errorf("control: ledger record: %w", err)
	}
	return s, true, nil
}
