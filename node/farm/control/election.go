package control

import (
	"context"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/sluice-daq/sluice/node/farm"
)

// Leadership is this node's term as event manager.
type Leadership struct {
	c     *Client
	e     *concurrency.Election
	s     *concurrency.Session
	node  string
	epoch uint64
}

// Campaign waits until ms's node is the farm's EM (or ctx ends) and
// returns its leadership. The election key lives under the membership's
// lease: fencing the node deposes it. The epoch is the election key's
// create revision, larger than every earlier EM's.
func (c *Client) Campaign(ctx context.Context, ms *Membership) (*Leadership, error) {
	e := concurrency.NewElection(ms.session, c.emPrefix())
	node := ms.member.Node
	if err := e.Campaign(ctx, node); err != nil {
		return nil, fmt.Errorf("control: campaign of %s: %w", node, err)
	}
	return &Leadership{c: c, e: e, s: ms.session, node: node, epoch: uint64(e.Rev())}, nil
}

// Epoch is this EM's epoch.
func (l *Leadership) Epoch() uint64 { return l.epoch }

// Done is closed when the leadership's lease ended (fenced, expired).
func (l *Leadership) Done() <-chan struct{} { return l.s.Done() }

// Resign steps down, leaving the node a member.
func (l *Leadership) Resign(ctx context.Context) error {
	if err := l.e.Resign(ctx); err != nil {
		return fmt.Errorf("control: resign of %s: %w", l.node, err)
	}
	return nil
}

// isLeader is the transaction guard: our election key still exists with
// the revision it was created at.
func (l *Leadership) isLeader() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(l.e.Key()), "=", int64(l.epoch))
}

// Reserve takes the next n assignment ids from the farm's high-water mark,
// atomically and only while this EM leads. Ids start at 1. Errors:
// ErrNotLeader (deposed: the caller must stop assigning), etcd's.
func (l *Leadership) Reserve(ctx context.Context, n uint64) (farm.Block, error) {
	if n == 0 {
		return farm.Block{}, fmt.Errorf("control: reserve 0 ids")
	}
	key := l.c.reservedKey()
	for {
		resp, err := l.c.cli.Txn(ctx).If(l.isLeader()).Then(clientv3.OpGet(key)).Commit()
		if err != nil {
			return farm.Block{}, fmt.Errorf("control: reserve: %w", err)
		}
		if !resp.Succeeded {
			return farm.Block{}, fmt.Errorf("%w: %s (epoch %d)", ErrNotLeader, l.node, l.epoch)
		}
		first, mod := uint64(1), int64(0)
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			if first, err = strconv.ParseUint(string(kvs[0].Value), 10, 64); err != nil || first == 0 {
				return farm.Block{}, fmt.Errorf("control: %s holds %q, not an assignment id", key, kvs[0].Value)
			}
			mod = kvs[0].ModRevision
		}
		end := first + n
		if end < first {
			return farm.Block{}, fmt.Errorf("control: assignment ids exhausted at %d", first)
		}
		resp, err = l.c.cli.Txn(ctx).
			If(l.isLeader(), clientv3.Compare(clientv3.ModRevision(key), "=", mod)).
			Then(clientv3.OpPut(key, strconv.FormatUint(end, 10))).Commit()
		if err != nil {
			return farm.Block{}, fmt.Errorf("control: reserve: %w", err)
		}
		if resp.Succeeded {
			return farm.Block{First: first, End: end}, nil
		}
		// Deposed, or the mark moved under us (a racing EM): look again.
	}
}

// Reserved is the farm's high-water mark: every id below it may have been
// used (1 when none was reserved).
func (c *Client) Reserved(ctx context.Context) (uint64, error) {
	resp, err := c.cli.Get(ctx, c.reservedKey())
	if err != nil {
		return 0, fmt.Errorf("control: reserved: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return 1, nil
	}
	return strconv.ParseUint(string(resp.Kvs[0].Value), 10, 64)
}

// Leader is the current EM, as the election prefix says.
type Leader struct {
	Node        string           `json:"node"`
	Epoch       uint64           `json:"epoch"`
	Incarnation farm.Incarnation `json:"incarnation"`
}

// Leader returns the current EM, or ok false when there is none.
func (c *Client) Leader(ctx context.Context) (Leader, bool, error) {
	resp, err := c.cli.Get(ctx, c.emPrefix(), clientv3.WithFirstCreate()...)
	if err != nil {
		return Leader{}, false, fmt.Errorf("control: leader: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return Leader{}, false, nil
	}
	kv := resp.Kvs[0]
	return Leader{Node: string(kv.Value), Epoch: uint64(kv.CreateRevision), Incarnation: farm.Incarnation(kv.Lease)}, true, nil
}

// WatchLeader sends the current EM, if there is one, and then every
// change of leader (OK false: none now), until ctx ends; a failed watch
// closes the channel after an entry with Err set.
func (c *Client) WatchLeader(ctx context.Context) <-chan LeaderEvent {
	out := make(chan LeaderEvent, 4)
	go func() {
		defer close(out)
		send := func(e LeaderEvent) bool {
			select {
			case out <- e:
				return true
			case <-ctx.Done():
				return false
			}
		}
		resp, err := c.cli.Get(ctx, c.emPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			send(LeaderEvent{Err: fmt.Errorf("control: watch leader: %w", err)})
			return
		}
		wch := c.cli.Watch(clientv3.WithRequireLeader(ctx), c.emPrefix(), clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
		var last Leader
		var had bool
		report := func() bool {
			l, ok, err := c.Leader(ctx)
			if err != nil {
				send(LeaderEvent{Err: err})
				return false
			}
			if ok == had && l == last {
				return true
			}
			last, had = l, ok
			return send(LeaderEvent{Leader: l, OK: ok})
		}
		if !report() {
			return
		}
		for wr := range wch {
			if err := wr.Err(); err != nil {
				send(LeaderEvent{Err: fmt.Errorf("control: watch leader: %w", err)})
				return
			}
			if !report() {
				return
			}
		}
	}()
	return out
}

// LeaderEvent is a change of EM: Leader when OK, none otherwise.
type LeaderEvent struct {
	Leader Leader
	OK     bool
	Err    error
}
