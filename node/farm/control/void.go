package control

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-daq/sluice/node/farm"
)

// Void records: when the EM declares a BU incarnation dead it gives that
// incarnation's unreleased assignments to other BUs; whatever the dead
// incarnation stored of them will be built again elsewhere. The EM
// records which assignments those were, so that the BU — continuing after
// it was fenced, or restarted — voids those events in its store (they
// must not be exported or replayed twice) and reports them to the EM as
// duplicate_after_failover. One record per failover, never per
// assignment: etcd carries epoch boundaries, not the work.

func (c *Client) voidPrefix(run uint32, bu string) string {
	return c.key("runs", strconv.FormatUint(uint64(run), 10), "void", bu) + "/"
}

// PutVoid records v (see farm.VoidRecord) for run. Idempotent.
func (c *Client) PutVoid(ctx context.Context, run uint32, v farm.VoidRecord) error {
	val, err := json.Marshal(v)
	if err != nil {
		return err
	}
	k := c.voidPrefix(run, v.BU) + fmt.Sprintf("%016x", v.Incarnation)
	if _, err := c.cli.Put(ctx, k, string(val)); err != nil {
		return fmt.Errorf("control: put void record: %w", err)
	}
	return nil
}

// Voids returns the void records of BU bu in run, oldest incarnation
// first.
func (c *Client) Voids(ctx context.Context, run uint32, bu string) ([]farm.VoidRecord, error) {
	resp, err := c.cli.Get(ctx, c.voidPrefix(run, bu), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("control: void records: %w", err)
	}
	var out []farm.VoidRecord
	for _, kv := range resp.Kvs {
		var v farm.VoidRecord
		if err := json.Unmarshal(kv.Value, &v); err != nil {
			return nil, fmt.Errorf("control: void record %s: %w", kv.Key, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// DeleteVoid removes the record of bu's incarnation inc once it was
// applied.
func (c *Client) DeleteVoid(ctx context.Context, run uint32, bu string, inc uint64) error {
	if _, err := c.cli.Delete(ctx, c.voidPrefix(run, bu)+fmt.Sprintf("%016x", inc)); err != nil {
		return fmt.Errorf("control: delete void record: %w", err)
	}
	return nil
}
