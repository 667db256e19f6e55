package control

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-daq/sluice/node/farm"

	"github.com/sluice-daq/sluice/schemas"
)

// RunMask is what run control masked for the rest of a run (runs/<run>/mask):
// nodes (the sources their RU read out) and sources that BUs no longer wait
// for, and that an event manager need not find read out to lead. A dead RU
// is masked so that a new EM can lead without it and nobody expects its
// data; a source that misbehaves is masked the same way. Masks only grow
// within a run.
type RunMask struct {
	Run     uint32    `json:"run"`
	Nodes   []string  `json:"nodes,omitempty"`   // sorted
	Sources string    `json:"sources,omitempty"` // a source list, "0-511,600"
	By      string    `json:"by,omitempty"`
	Since   time.Time `json:"since"`
	// NodeSources are the sources of each masked node as its membership
	// record said when it was masked (absent for a node already gone:
	// members that saw it know them).
	NodeSources map[string]string `json:"node_sources,omitempty"`
	Revision    int64             `json:"revision,omitempty"` // the record's mod revision (set by reads)
}

// SourceIDs are the mask's sources: Sources and NodeSources together.
func (m RunMask) SourceIDs() []uint32 {
	ids, _ := schemas.ParseSourceList(m.Sources)
	for _, s := range m.NodeSources {
		more, _ := schemas.ParseSourceList(s)
		ids = append(ids, more...)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// sourcesKey holds the sources node read out when it last joined (no
// lease: it outlives the node).
func (c *Client) sourcesKey(node string) string { return c.prefix + "sources/" + node }

func (c *Client) maskKey(run uint32) string {
	return c.key("runs", strconv.FormatUint(uint64(run), 10), "mask")
}

// Mask adds nodes and sources to run's mask (a transaction on the record's
// revision, retried when another writer won) and returns the new mask. A
// masked node's sources are recorded with it: its membership record's,
// or, for a node gone, those it read out when it last joined.
// Errors: nothing to mask, a node id with '/', etcd's.
func (c *Client) Mask(ctx context.Context, run uint32, nodes []string, sources []uint32, by string) (RunMask, error) {
	if len(nodes) == 0 && len(sources) == 0 {
		return RunMask{}, fmt.Errorf("control: mask: no node and no source")
	}
	for _, n := range nodes {
		if n == "" || strings.Contains(n, "/") {
			return RunMask{}, fmt.Errorf("control: mask: node id %q", n)
		}
	}
	members, _, err := c.Members(ctx)
	if err != nil {
		return RunMask{}, err
	}
	key := c.maskKey(run)
	for {
		m, ok, err := c.RunMask(ctx, run)
		if err != nil {
			return RunMask{}, err
		}
		if !ok {
			m = RunMask{Run: run}
		}
		for _, n := range nodes {
			if !slices.Contains(m.Nodes, n) {
				m.Nodes = append(m.Nodes, n)
			}
			srcs := ""
			for _, mb := range members {
				if mb.Node == n {
					srcs = mb.Sources
				}
			}
			if srcs == "" {
				// Gone (a dead RU's lease expired): its last join's sources.
				resp, err := c.cli.Get(ctx, c.sourcesKey(n))
				if err != nil {
					return RunMask{}, fmt.Errorf("control: mask: %w", err)
				}
				if len(resp.Kvs) > 0 {
					srcs = string(resp.Kvs[0].Value)
				}
			}
			if srcs != "" {
				if m.NodeSources == nil {
					m.NodeSources = map[string]string{}
				}
				m.NodeSources[n] = srcs
			}
		}
		slices.Sort(m.Nodes)
		have, _ := schemas.ParseSourceList(m.Sources)
		m.Sources = schemas.FormatSourceList(append(have, sources...))
		m.By, m.Since = by, time.Now().UTC()
		rev := m.Revision
		m.Revision = 0
		val, err := json.Marshal(m)
		if err != nil {
			return RunMask{}, err
		}
		resp, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, string(val))).Commit()
		if err != nil {
			return RunMask{}, fmt.Errorf("control: mask: %w", err)
		}
		if resp.Succeeded {
			m.Revision = resp.Header.Revision
			return m, nil
		}
	}
}

// RunMask returns run's mask (ok false: nothing masked).
func (c *Client) RunMask(ctx context.Context, run uint32) (RunMask, bool, error) {
	resp, err := c.cli.Get(ctx, c.maskKey(run))
	if err != nil {
		return RunMask{}, false, fmt.Errorf("control: mask: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return RunMask{}, false, nil
	}
	m, err := decodeMask(resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
	return m, err == nil, err
}

func decodeMask(v []byte, rev int64) (RunMask, error) {
	var m RunMask
	if err := json.Unmarshal(v, &m); err != nil {
		return RunMask{}, fmt.Errorf("control: mask record: %w", err)
	}
	if _, err := schemas.ParseSourceList(m.Sources); err != nil {
		return RunMask{}, fmt.Errorf("control: mask record: sources: %w", err)
	}
	m.Revision = rev
	return m, nil
}

// WatchMask sends run's mask (if any), then every change, until ctx ends.
// A record that does not decode is skipped (errors are logged by the
// caller from the channel's Err field).
func (c *Client) WatchMask(ctx context.Context, run uint32) <-chan MaskEvent {
	out := make(chan MaskEvent, 4)
	go c.watchKey(ctx, c.maskKey(run), func(v []byte, rev int64) bool {
		m, err := decodeMask(v, rev)
		return sendCtx(ctx, out, MaskEvent{Mask: m, Err: err})
	}, func(err error) { sendCtx(ctx, out, MaskEvent{Err: err}); close(out) })
	return out
}

// MaskEvent is a mask as it changed, or the watch's error.
type MaskEvent struct {
	Mask RunMask
	Err  error
}

// DrainRequest asks incarnation Incarnation of Node to drain (stop taking
// work, finish what it holds) and leave the farm (drain/<node>).
type DrainRequest struct {
	Node        string           `json:"node"`
	Incarnation farm.Incarnation `json:"incarnation"`
	By          string           `json:"by,omitempty"`
	Since       time.Time        `json:"since"`
}

func (c *Client) drainPrefix() string { return c.prefix + "drain/" }

// Drain asks node's live incarnation to drain and leave, and returns it.
// Errors: ErrNotMember when node is not a member, etcd's.
func (c *Client) Drain(ctx context.Context, node, by string) (DrainRequest, error) {
	members, _, err := c.Members(ctx)
	if err != nil {
		return DrainRequest{}, err
	}
	for _, m := range members {
		if m.Node != node {
			continue
		}
		d := DrainRequest{Node: node, Incarnation: m.Incarnation, By: by, Since: time.Now().UTC()}
		val, err := json.Marshal(d)
		if err != nil {
			return DrainRequest{}, err
		}
		if _, err := c.cli.Put(ctx, c.drainPrefix()+node, string(val)); err != nil {
			return DrainRequest{}, fmt.Errorf("control: drain %s: %w", node, err)
		}
		return d, nil
	}
	return DrainRequest{}, fmt.Errorf("%w: %s", ErrNotMember, node)
}

// WatchDrains sends every drain request (those standing, then new ones)
// until ctx ends; each is for one incarnation, so a stale one (of an
// incarnation gone) does nothing.
func (c *Client) WatchDrains(ctx context.Context) <-chan DrainRequest {
	out := make(chan DrainRequest, 4)
	go c.watchKey(ctx, c.drainPrefix(), func(v []byte, _ int64) bool {
		var d DrainRequest
		if json.Unmarshal(v, &d) != nil {
			return true
		}
		return sendCtx(ctx, out, d)
	}, func(error) { close(out) }, clientv3.WithPrefix())
	return out
}

func sendCtx[T any](ctx context.Context, ch chan<- T, v T) bool {
	select {
	case ch <- v:
		return true
	case <-ctx.Done():
		return false
	}
}

// watchKey calls put for the key's (or prefix's) current values, then for
// every later put, until put returns false or ctx ends; end gets the
// watch's error (nil when ctx ended).
func (c *Client) watchKey(ctx context.Context, key string, put func(v []byte, rev int64) bool, end func(error), opts ...clientv3.OpOption) {
	var err error
	defer func() { end(err) }()
	resp, gerr := c.cli.Get(ctx, key, opts...)
	if gerr != nil {
		if ctx.Err() == nil {
			err = fmt.Errorf("control: %s: %w", key, gerr)
		}
		return
	}
	for _, kv := range resp.Kvs {
		if !put(kv.Value, kv.ModRevision) {
			return
		}
	}
	wopts := append([]clientv3.OpOption{clientv3.WithRev(resp.Header.Revision + 1)}, opts...)
	for wr := range c.cli.Watch(clientv3.WithRequireLeader(ctx), key, wopts...) {
		if werr := wr.Err(); werr != nil {
			err = fmt.Errorf("control: watch %s: %w", key, werr)
			return
		}
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypePut && !put(ev.Kv.Value, ev.Kv.ModRevision) {
				return
			}
		}
	}
}
