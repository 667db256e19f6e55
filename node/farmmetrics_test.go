package node

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluice-daq/sluice/node/farm"
	"github.com/sluice-daq/sluice/node/farm/agent"
)

// farmStatusFixture is a folded node's status: RU, BU and EM.
func farmStatusFixture() Status {
	return Status{
		Ledger: Ledger{Farm: &FarmLedger{Decided: 7, Durable: 5, GivenUp: 1, OutsideAssignment: 12}},
		Farm: &FarmStatus{Farm: "demo", Roles: "ru,bu,em", Incarnation: "1a2b", EM: "farm-a", EMEpoch: 9, IsEM: true,
			RunState: "running",
			Peers: []FarmPeer{
				{PeerStatus: agent.PeerStatus{Node: "farm-b", Connected: true}, HeldBytes: 4096},
				{PeerStatus: agent.PeerStatus{Node: "farm-c"}},
			},
			RU: &farm.RUStats{Held: 30, Freed: 100, Duplicate: 2, Late: 3, WaitedBehind: 6, BytesPerBU: map[string]int64{"farm-a": 1024, "farm-b": 4096}},
			BU: &farm.BUStats{InFlight: 2, BytesUsed: 8192, Completed: 11, Incomplete: 1, WaitedFinal: 5, FinalTimedOut: 1},
			EMState: &farm.EMStats{Assigned: 20, Reassigned: 4, Settled: 15, Queued: 3, Open: 5,
				Credits: map[string]int64{"farm-a": 40, "farm-b": 0}},
			SendPool: agent.PoolStatus{UsedBytes: 65536, LimitBytes: 1 << 26},
			Dropped:  map[string]uint64{"no_em": 2},
		},
	}
}

// TestFarmMetrics: a farm node's metrics carry the /status farm section's
// values, pass Prometheus's lint (units, _total counters), and a node
// alone exposes none.
func TestFarmMetrics(t *testing.T) {
	st := farmStatusFixture()
	c := newFarmCollector(func() Status { return st })
	if probs, err := testutil.CollectAndLint(c); err != nil || len(probs) > 0 {
		t.Fatalf("lint: %v %+v", err, probs)
	}
	want := `
# HELP sluice_farm_ru_held_bytes Bytes this node's readout unit holds for assignments sent to a builder unit and not released, by builder unit.
# TYPE sluice_farm_ru_held_bytes gauge
sluice_farm_ru_held_bytes{bu="farm-a"} 1024
sluice_farm_ru_held_bytes{bu="farm-b"} 4096
# HELP sluice_farm_peer_connected 1 while the peer link to another member is up, else 0.
# TYPE sluice_farm_peer_connected gauge
sluice_farm_peer_connected{peer="farm-b"} 1
sluice_farm_peer_connected{peer="farm-c"} 0
# HELP sluice_farm_event_manager 1 while this node is the farm's event manager, else 0.
# TYPE sluice_farm_event_manager gauge
sluice_farm_event_manager 1
# HELP sluice_farm_member_info This node's membership of a farm: 1, labelled with the farm id, its roles and incarnation (lease id, hex).
# TYPE sluice_farm_member_info gauge
sluice_farm_member_info{farm="demo",incarnation="1a2b",roles="ru,bu,em"} 1
# HELP sluice_farm_em_assignments_total Assignments this node made as event manager, by kind (first, reassigned).
# TYPE sluice_farm_em_assignments_total counter
sluice_farm_em_assignments_total{kind="first"} 16
sluice_farm_em_assignments_total{kind="reassigned"} 4
# HELP sluice_farm_em_credit_events Event credit each live builder unit has left with this node's event manager.
# TYPE sluice_farm_em_credit_events gauge
sluice_farm_em_credit_events{bu="farm-a"} 40
sluice_farm_em_credit_events{bu="farm-b"} 0
# HELP sluice_farm_bu_assignments_completed_total Assignments whose data all arrived at this node's builder unit, by completeness (incomplete: some readout unit's data missing).
# TYPE sluice_farm_bu_assignments_completed_total counter
sluice_farm_bu_assignments_completed_total{completeness="complete"} 10
sluice_farm_bu_assignments_completed_total{completeness="incomplete"} 1
# HELP sluice_farm_ru_assignments_waited_behind_total Assignments this node's readout unit kept waiting past farm.wait for a source of its own behind them and still sending.
# TYPE sluice_farm_ru_assignments_waited_behind_total counter
sluice_farm_ru_assignments_waited_behind_total 6
# HELP sluice_farm_bu_assignments_waited_final_total Assignments this node's builder unit kept waiting past farm.wait for a live readout unit's final data, by how the wait ended (timed_out: built without it at the behind limit; other: its data or its RU's death or mask).
# TYPE sluice_farm_bu_assignments_waited_final_total counter
sluice_farm_bu_assignments_waited_final_total{end="other"} 4
sluice_farm_bu_assignments_waited_final_total{end="timed_out"} 1
# HELP sluice_farm_assignments_built_total Assignments this node's builder unit handed to its builder, by outcome (decided, durable, given_up).
# TYPE sluice_farm_assignments_built_total counter
sluice_farm_assignments_built_total{outcome="decided"} 7
sluice_farm_assignments_built_total{outcome="durable"} 5
sluice_farm_assignments_built_total{outcome="given_up"} 1
# HELP sluice_farm_run_state The farm's desired state of this node's run as last seen in etcd: 1 for the current state, 0 for the others.
# TYPE sluice_farm_run_state gauge
sluice_farm_run_state{state="running"} 1
sluice_farm_run_state{state="stopped"} 0
# HELP sluice_farm_messages_dropped_total Farm messages this node dropped, by reason.
# TYPE sluice_farm_messages_dropped_total counter
sluice_farm_messages_dropped_total{reason="no_em"} 2
`
	names := []string{"sluice_farm_ru_held_bytes", "sluice_farm_peer_connected", "sluice_farm_event_manager", "sluice_farm_member_info",
		"sluice_farm_em_assignments_total", "sluice_farm_em_credit_events", "sluice_farm_bu_assignments_completed_total",
		"sluice_farm_ru_assignments_waited_behind_total", "sluice_farm_bu_assignments_waited_final_total",
		"sluice_farm_assignments_built_total", "sluice_farm_run_state", "sluice_farm_messages_dropped_total"}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	alone := newFarmCollector(func() Status { return Status{} })
	if n := testutil.CollectAndCount(alone); n != 0 {
		t.Fatalf("a node alone exposes %d farm metrics", n)
	}
	// Registered with the node's own collectors: no clash of names.
	reg := newRegistry(func() Status { return st })
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	_ = prometheus.Collector(c)
}
