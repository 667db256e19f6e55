package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-daq/sluice/node/farm"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Member is a node's membership record (nodes/<id>).
type Member struct {
	Node    string    `json:"node"`
	Roles   string    `json:"roles"`          // e.g. "ru,bu,em" (farm.Roles)
	Sources string    `json:"sources"`        // source list the node reads out
	Address string    `json:"address"`        // peer transport address
	HTTP    string    `json:"http,omitempty"` // the node's HTTP endpoint (metrics, status)
	Joined  time.Time `json:"joined"`
	// Incarnation is the record's lease id (reads take it from the key's
	// lease, whatever the stored value says).
	Incarnation farm.Incarnation `json:"incarnation"`
}

// Membership is this node's registration: a session (a lease kept alive)
// and the member key under it. It ends when the lease is revoked (fenced)
// or expires, or by Leave.
type Membership struct {
	c       *Client
	session *concurrency.Session
	member  Member
	key     string
}

// Join registers m under a new lease of ttl (rounded up to whole seconds;
// etcd may grant more, see the package doc). Errors: ErrMemberExists when
// a live incarnation of m.Node is registered (naming its lease), etcd's.
func (c *Client) Join(ctx context.Context, m Member, ttl time.Duration) (*Membership, error) {
	if m.Node == "" || strings.Contains(m.Node, "/") || len(m.Node) > 255 {
		return nil, fmt.Errorf("control: node id %q: want 1..255 bytes without '/'", m.Node)
	}
	secs := int(math.Ceil(ttl.Seconds()))
	if secs < 1 {
		secs = 1
	}
	s, err := concurrency.NewSession(c.cli, concurrency.WithTTL(secs))
	if err != nil {
		return nil, fmt.Errorf("control: join %s: lease: %w", m.Node, err)
	}
	if m.Joined.IsZero() {
		m.Joined = time.Now().UTC()
	}
	m.Incarnation = farm.Incarnation(s.Lease())
	val, err := json.Marshal(m)
	if err != nil {
		s.Close()
		return nil, err
	}
	key := c.nodesPrefix() + m.Node
	then := []clientv3.Op{clientv3.OpPut(key, string(val), clientv3.WithLease(s.Lease()))}
	if m.Sources != "" {
		// Outlives the lease: run control masks a dead RU by its node id.
		then = append(then, clientv3.OpPut(c.sourcesKey(m.Node), m.Sources))
	}
	resp, err := c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(then...).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("control: join %s: %w", m.Node, err)
	}
	if !resp.Succeeded {
		s.Close()
		var lease int64
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			lease = kvs[0].Lease
		}
		return nil, fmt.Errorf("%w: %s is registered by incarnation %x", ErrMemberExists, m.Node, lease)
	}
	return &Membership{c: c, session: s, member: m, key: key}, nil
}

// Incarnation is the membership's lease id.
func (ms *Membership) Incarnation() uint64 { return uint64(ms.session.Lease()) }

// Member is the record as registered.
func (ms *Membership) Member() Member { return ms.member }

// Session is the membership's session, for an election under the same
// lease (so fencing the node also deposes it).
func (ms *Membership) Session() *concurrency.Session { return ms.session }

// Done is closed when the membership ended: the lease was revoked (the
// node was fenced), expired (keep-alives did not get through) or Leave
// was called. A fenced node must Join again: a new incarnation.
func (ms *Membership) Done() <-chan struct{} { return ms.session.Done() }

// Leave ends the membership (after the node drained): the lease is
// revoked, so the member key goes at once.
func (ms *Membership) Leave(ctx context.Context) error {
	_, err := ms.c.cli.Revoke(ctx, ms.session.Lease())
	ms.session.Orphan()
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("control: leave %s: %w", ms.member.Node, err)
	}
	return nil
}

// Fencing is why an incarnation was fenced (fenced/<inc hex>): the node
// that revoked its lease and its reason, so the fenced node can tell that
// from its lease expiring (Fenced).
type Fencing struct {
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// fencingTTL is how long a Fencing record lasts (under a lease of its own):
// a fenced node that is only stopped reads it when it runs again.
const fencingTTL = 10 * time.Minute

func (c *Client) fencedKey(inc uint64) string { return fmt.Sprintf("%sfenced/%x", c.prefix, inc) }

// Fence records why (f) and revokes incarnation inc's lease: its member
// key (and election key) go, its session ends, and its later messages are
// stale. Fencing a lease that is already gone is not an error; a record
// that cannot be written does not stop the revoke.
func (c *Client) Fence(ctx context.Context, inc uint64, f Fencing) error {
	if f.At.IsZero() {
		f.At = time.Now().UTC()
	}
	if v, err := json.Marshal(f); err == nil {
		if l, err := c.cli.Grant(ctx, int64(fencingTTL/time.Second)); err == nil {
			_, _ = c.cli.Put(ctx, c.fencedKey(inc), string(v), clientv3.WithLease(l.ID))
		}
	}
	_, err := c.cli.Revoke(ctx, clientv3.LeaseID(inc))
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("control: fence %x: %w", inc, err)
	}
	return nil
}

// Fenced reads why incarnation inc was fenced: ok false when no node
// fenced it (its lease expired, or it left), or the record is gone.
func (c *Client) Fenced(ctx context.Context, inc uint64) (f Fencing, ok bool, err error) {
	resp, err := c.cli.Get(ctx, c.fencedKey(inc))
	if err != nil {
		return Fencing{}, false, fmt.Errorf("control: fencing of %x: %w", inc, err)
	}
	if len(resp.Kvs) == 0 {
		return Fencing{}, false, nil
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, &f); err != nil {
		return Fencing{}, false, fmt.Errorf("control: fencing of %x: %w", inc, err)
	}
	return f, true, nil
}

func decodeMember(v []byte, lease int64) (Member, error) {
	var m Member
	if err := json.Unmarshal(v, &m); err != nil {
		return Member{}, fmt.Errorf("control: member record: %w", err)
	}
	m.Incarnation = farm.Incarnation(lease)
	return m, nil
}

// Members lists the registered members by node id, with the revision
// they were read at (to watch from).
func (c *Client) Members(ctx context.Context) ([]Member, int64, error) {
	resp, err := c.cli.Get(ctx, c.nodesPrefix(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, 0, fmt.Errorf("control: members: %w", err)
	}
	out := make([]Member, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		m, err := decodeMember(kv.Value, kv.Lease)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", kv.Key, err)
		}
		out = append(out, m)
	}
	return out, resp.Header.Revision, nil
}

// MemberEvent is a change of membership: a member joined (Left false) or
// its record went (Left: it left, was fenced or its lease expired).
type MemberEvent struct {
	Left   bool
	Member Member
	Err    error // the watch failed (the channel closes after it)
}

// WatchMembers reports membership changes after revision rev (from
// Members) until ctx ends.
func (c *Client) WatchMembers(ctx context.Context, rev int64) <-chan MemberEvent {
	out := make(chan MemberEvent, 16)
	wch := c.cli.Watch(clientv3.WithRequireLeader(ctx), c.nodesPrefix(), clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithPrevKV())
	go func() {
		defer close(out)
		send := func(e MemberEvent) bool {
			select {
			case out <- e:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for wr := range wch {
			if err := wr.Err(); err != nil {
				send(MemberEvent{Err: fmt.Errorf("control: watch members: %w", err)})
				return
			}
			for _, ev := range wr.Events {
				var e MemberEvent
				var err error
				if ev.Type == clientv3.EventTypeDelete {
					e.Left = true
					if ev.PrevKv != nil {
						e.Member, err = decodeMember(ev.PrevKv.Value, ev.PrevKv.Lease)
					} else {
						e.Member.Node = strings.TrimPrefix(string(ev.Kv.Key), c.nodesPrefix())
					}
				} else {
					e.Member, err = decodeMember(ev.Kv.Value, ev.Kv.Lease)
				}
				if err != nil {
					e = MemberEvent{Err: err}
				}
				if !send(e) {
					return
				}
			}
		}
	}()
	return out
}
