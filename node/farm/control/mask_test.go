package control

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

// TestMaskAndDrain: masks grow (nodes with the sources their records
// list, sources merged), watchers see the current mask then each change;
// a drain request names the node's live incarnation, and none can be made
// for a node that is not a member.
func TestMaskAndDrain(t *testing.T) {
	c := dial(t, startEtcd(t))
	ctx := ctxT(t)
	ms := join(t, c, "ru-a")
	if _, ok, err := c.RunMask(ctx, 7); err != nil || ok {
		t.Fatalf("mask before any: %v %v", ok, err)
	}
	if _, err := c.Mask(ctx, 7, nil, nil, "op"); err == nil {
		t.Fatal("an empty mask was taken")
	}
	m, err := c.Mask(ctx, 7, nil, []uint32{5, 6}, "op")
	if err != nil || m.Sources != "5-6" {
		t.Fatalf("mask %+v: %v", m, err)
	}
	w := c.WatchMask(ctx, 7)
	if e := <-w; e.Err != nil || e.Mask.Sources != "5-6" {
		t.Fatalf("first watched mask %+v", e)
	}
	m, err = c.Mask(ctx, 7, []string{"ru-a", "gone"}, []uint32{4}, "op")
	if err != nil || m.Sources != "4-6" || !reflect.DeepEqual(m.Nodes, []string{"gone", "ru-a"}) ||
		m.NodeSources["ru-a"] != "0-9" || !reflect.DeepEqual(m.SourceIDs(), []uint32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("mask %+v: %v", m, err)
	}
	select {
	case e := <-w:
		if e.Err != nil || !reflect.DeepEqual(e.Mask.Nodes, m.Nodes) || e.Mask.Revision != m.Revision {
			t.Fatalf("watched %+v, want %+v", e, m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no mask change seen")
	}
	drains := c.WatchDrains(ctx)
	d, err := c.Drain(ctx, "ru-a", "op")
	if err != nil || uint64(d.Incarnation) != ms.Incarnation() {
		t.Fatalf("drain %+v: %v", d, err)
	}
	select {
	case got := <-drains:
		if got.Node != "ru-a" || uint64(got.Incarnation) != ms.Incarnation() {
			t.Fatalf("watched drain %+v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no drain request seen")
	}
	// A node gone (its lease revoked, as a dead node's expires) is masked
	// with the sources it read out at its last join.
	join(t, c, "ru-b").Leave(ctx)
	m, err = c.Mask(ctx, 8, []string{"ru-b"}, nil, "op")
	if err != nil || m.NodeSources["ru-b"] != "0-9" {
		t.Fatalf("mask of a node gone %+v: %v", m, err)
	}
	if _, err := c.Drain(ctx, "gone", "op"); !errors.Is(err, ErrNotMember) {
		t.Fatalf("drain of a non-member: %v", err)
	}
}
