package node

import (
	"github.com/prometheus/client_golang/prometheus"
)

// farmCollector exposes the farm part of one Status snapshot per scrape
// (nothing when the node runs alone): the node's roles, the event
// manager, the farm's run state, its peers and what its RU, BU and EM
// hold and did.
type farmCollector struct {
	status func() Status
	d      map[string]*prometheus.Desc
}

var farmMetricDefs = []metricDef{
	{"sluice_farm_member_info", "This node's membership of a farm: 1, labelled with the farm id, its roles and incarnation (lease id, hex).", []string{"farm", "roles", "incarnation"}},
	{"sluice_farm_event_manager", "1 while this node is the farm's event manager, else 0.", nil},
	{"sluice_farm_event_manager_epoch", "Epoch of the event manager this node follows (0: none leads).", nil},
	{"sluice_farm_run_state", "The farm's desired state of this node's run as last seen in etcd: 1 for the current state, 0 for the others.", []string{"state"}},
	{"sluice_farm_peer_connected", "1 while the peer link to another member is up, else 0.", []string{"peer"}},
	{"sluice_farm_ru_held_bytes", "Bytes this node's readout unit holds for assignments sent to a builder unit and not released, by builder unit.", []string{"bu"}},
	{"sluice_farm_ru_held_packets", "Multi-fragment packets this node's readout unit holds (not yet released by every builder unit that needs them).", nil},
	{"sluice_farm_ru_packets_freed_total", "Packets this node's readout unit freed once every assignment needing them was released.", nil},
	{"sluice_farm_ru_packets_dropped_total", "Packets this node's readout unit dropped, by reason (duplicate, late).", []string{"reason"}},
	{"sluice_farm_ru_elements_never_announced_total", "Elements (events, or packets) of this readout unit's packets that the trigger source never named before it ended the run: freed unsent.", nil},
	{"sluice_farm_ru_assignments_waited_behind_total", "Assignments this node's readout unit kept waiting past farm.wait for a source of its own behind them and still sending.", nil},
	{"sluice_farm_bu_assignments_waited_final_total", "Assignments this node's builder unit kept waiting past farm.wait for a live readout unit's final data, by how the wait ended (timed_out: built without it at the behind limit; other: its data or its RU's death or mask).", []string{"end"}},
	{"sluice_farm_bu_assignments_in_flight", "Assignments this node's builder unit holds that are not yet released.", nil},
	{"sluice_farm_bu_in_flight_bytes", "Payload bytes received by this node's builder unit for assignments not yet released.", nil},
	{"sluice_farm_bu_assignments_completed_total", "Assignments whose data all arrived at this node's builder unit, by completeness (incomplete: some readout unit's data missing).", []string{"completeness"}},
	{"sluice_farm_assignments_built_total", "Assignments this node's builder unit handed to its builder, by outcome (decided, durable, given_up).", []string{"outcome"}},
	{"sluice_farm_fragments_outside_assignment_total", "Fragments of packets sent for an assignment whose event ids are in another assignment (not built here).", nil},
	{"sluice_farm_em_assignments_total", "Assignments this node made as event manager, by kind (first, reassigned).", []string{"kind"}},
	{"sluice_farm_em_assignments_settled_total", "Assignments this node's event manager saw built (decided or durable).", nil},
	{"sluice_farm_em_queued_elements", "Elements (events or packets) announced to this node's event manager and not yet assigned.", nil},
	{"sluice_farm_em_open_assignments", "Assignments of this node's event manager below the release policy.", nil},
	{"sluice_farm_em_credit_events", "Event credit each live builder unit has left with this node's event manager.", []string{"bu"}},
	{"sluice_farm_send_pool_bytes", "Bytes of this node's readout-unit send buffers in use.", nil},
	{"sluice_farm_send_pool_limit_bytes", "Bound of this node's readout-unit send buffers.", nil},
	{"sluice_farm_messages_dropped_total", "Farm messages this node dropped, by reason.", []string{"reason"}},
	{"sluice_farm_peer_connections_refused_total", "Peer connections (dialled or accepted) whose hello failed, by reason (token: the tokens differ; farm: another farm id).", []string{"reason"}},
}

func newFarmCollector(status func() Status) *farmCollector {
	c := &farmCollector{status: status, d: map[string]*prometheus.Desc{}}
	for _, m := range farmMetricDefs {
		c.d[m.name] = prometheus.NewDesc(m.name, m.help, m.labels, nil)
	}
	return c
}

// Describe sends every descriptor.
func (c *farmCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.d {
		ch <- d
	}
}

// Collect reads one Status and sends the farm's metrics.
func (c *farmCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.status()
	f := s.Farm
	if f == nil {
		return
	}
	counter := func(name string, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.d[name], prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(name string, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.d[name], prometheus.GaugeValue, v, labels...)
	}
	gauge("sluice_farm_member_info", 1, f.Farm, f.Roles, f.Incarnation)
	gauge("sluice_farm_event_manager", boolFloat(f.IsEM))
	gauge("sluice_farm_event_manager_epoch", float64(f.EMEpoch))
	for _, st := range []string{"running", "stopped"} {
		gauge("sluice_farm_run_state", boolFloat(f.RunState == st), st)
	}
	for _, p := range f.Peers {
		gauge("sluice_farm_peer_connected", boolFloat(p.Connected), p.Node)
	}
	if ru := f.RU; ru != nil {
		for bu, b := range ru.BytesPerBU {
			gauge("sluice_farm_ru_held_bytes", float64(b), bu)
		}
		gauge("sluice_farm_ru_held_packets", float64(ru.Held))
		counter("sluice_farm_ru_packets_freed_total", ru.Freed)
		counter("sluice_farm_ru_packets_dropped_total", ru.Duplicate, "duplicate")
		counter("sluice_farm_ru_packets_dropped_total", ru.Late, "late")
		counter("sluice_farm_ru_elements_never_announced_total", ru.NeverAnnouncedTotal())
		counter("sluice_farm_ru_assignments_waited_behind_total", ru.WaitedBehind)
	}
	if bu := f.BU; bu != nil {
		gauge("sluice_farm_bu_assignments_in_flight", float64(bu.InFlight))
		gauge("sluice_farm_bu_in_flight_bytes", float64(bu.BytesUsed))
		counter("sluice_farm_bu_assignments_completed_total", bu.Completed-bu.Incomplete, "complete")
		counter("sluice_farm_bu_assignments_completed_total", bu.Incomplete, "incomplete")
		counter("sluice_farm_bu_assignments_waited_final_total", bu.WaitedFinal-bu.FinalTimedOut, "other")
		counter("sluice_farm_bu_assignments_waited_final_total", bu.FinalTimedOut, "timed_out")
	}
	if l := s.Ledger.Farm; l != nil {
		counter("sluice_farm_assignments_built_total", l.Decided, "decided")
		counter("sluice_farm_assignments_built_total", l.Durable, "durable")
		counter("sluice_farm_assignments_built_total", l.GivenUp, "given_up")
		counter("sluice_farm_fragments_outside_assignment_total", l.OutsideAssignment)
	}
	if em := f.EMState; em != nil {
		counter("sluice_farm_em_assignments_total", em.Assigned-em.Reassigned, "first")
		counter("sluice_farm_em_assignments_total", em.Reassigned, "reassigned")
		counter("sluice_farm_em_assignments_settled_total", em.Settled)
		gauge("sluice_farm_em_queued_elements", float64(em.Queued))
		gauge("sluice_farm_em_open_assignments", float64(em.Open))
		for bu, cr := range em.Credits {
			gauge("sluice_farm_em_credit_events", float64(cr), bu)
		}
	}
	gauge("sluice_farm_send_pool_bytes", float64(f.SendPool.UsedBytes))
	gauge("sluice_farm_send_pool_limit_bytes", float64(f.SendPool.LimitBytes))
	for why, n := range f.Dropped {
		counter("sluice_farm_messages_dropped_total", n, why)
	}
	for why, n := range f.PeersRefused {
		counter("sluice_farm_peer_connections_refused_total", n, why)
	}
}
