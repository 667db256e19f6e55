package agent

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/sluice-daq/sluice/node/farm"
	"github.com/sluice-daq/sluice/node/farm/control"
	"github.com/sluice-daq/sluice/schemas"
)

// TestDataForEndedBUUnpins: data an RU queues for a BU whose link was lost
// (the EM has not declared it dead yet: its member record is still there)
// is dropped when that incarnation's membership ends, so the packets it
// pinned go back to the readout. A folded node of make farm fenced under
// load left its data so pinned in a link made again after the loss (bound
// to no incarnation): the RU freed the packets, but the shm ring
// acknowledges in ring order, so the readout ring filled behind them and
// the farm stalled with every announced event built.
func TestDataForEndedBUUnpins(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// "z" sorts after "farm-c": it accepts, never dials (no transport here).
	a := &Agent{cfg: Config{Node: "z"}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), ctx: ctx,
		members: map[string]*member{}, peers: map[string]*peerConn{}, ended: map[uint64]bool{}}
	a.status.Dropped = map[string]uint64{}
	const inc = 0x7
	bu := control.Member{Node: "farm-c", Roles: "ru,bu", Incarnation: inc}
	a.members["farm-c"] = &member{Member: bu, roles: farm.RoleRU | farm.RoleBU}

	b := schemas.AppendMFP(nil, 5, 100, 0, 0, [][]byte{[]byte("fragment")}, nil)
	mfp, _, err := schemas.DecodeMFP(b)
	if err != nil {
		t.Fatal(err)
	}
	released := 0
	h := &held{mfp: mfp, release: func() { released++ }}
	pk := &farm.Packet{Source: 5, First: 100, N: 1, Bytes: len(b), Handle: h}
	send := func() {
		a.routeRU(farm.RUOutput{Kind: farm.RUSend, BU: "farm-c", Packets: []*farm.Packet{pk},
			Header: farm.DataHeader{Assignment: 3, Incarnation: inc, Packets: 1, Flags: farm.DataFinal}})
	}
	send()
	h.free() // the RU let it go (its assignment reassigned, released elsewhere)
	if released != 0 {
		t.Fatalf("released %d times while queued for farm-c", released)
	}
	// The EM fenced farm-c: its record goes.
	a.memberEvent(ctx, control.MemberEvent{Member: bu, Left: true})
	if released != 1 {
		t.Fatalf("packet released %d times after farm-c's membership ended, want 1: its data still queued", released)
	}
	// Later data for the ended incarnation is not queued at all.
	h2 := &held{mfp: mfp, release: func() { released++ }}
	pk.Handle = h2
	send()
	h2.free()
	if released != 2 {
		t.Fatalf("data for an ended incarnation pinned its packet (released %d, want 2)", released)
	}
	if a.status.Dropped["data_for_ended_bu"] != 1 {
		t.Fatalf("dropped %v, want data_for_ended_bu 1", a.status.Dropped)
	}
	for _, p := range a.peers {
		p.close()
	}
}
