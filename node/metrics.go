package node

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sluice-daq/sluice/node/fill"
	"github.com/sluice-daq/sluice/schemas"
)

// newRegistry returns the node's own Prometheus registry (never the global
// default, so tests and several nodes in one process do not collide) with
// the Go runtime and process collectors and the node's status collector.
func newRegistry(status func() Status) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newStatusCollector(status),
		newFarmCollector(status),
	)
	return reg
}

// statusCollector exposes one Status snapshot per scrape. Reading the
// node's counters at scrape time (instead of mirroring them into separate
// prometheus counters) keeps /metrics, /status and the ledger identical.
type statusCollector struct {
	status func() Status
	d      map[string]*prometheus.Desc
}

type metricDef struct {
	name, help string
	labels     []string
}

var metricDefs = []metricDef{
	{"sluice_run_state", "Run-control state: 1 for the current state, 0 for the others.", []string{"state"}},
	{"sluice_run_number", "Number of the run being taken.", nil},
	{"sluice_fragments_received_total", "Fragments handed to the event builder by the inputs.", nil},
	{"sluice_fragments_in_events_total", "Fragments inside built events.", nil},
	{"sluice_fragments_discarded_total", "Fragments discarded by the event builder, by reason.", []string{"reason"}},
	{"sluice_fragments_suspect_total", "Fragments discarded as suspect_id (event id far from the other sources'), by source.", []string{"source"}},
	{"sluice_builder_resyncs_total", "Event-counter resets (resyncs) the builder detected.", nil},
	{"sluice_source_event_id_resets_total", "Event-counter resets of one source alone (its ids went back below the others' while they went on), by source; its fragments until it catches up are discarded as reset.", []string{"source"}},
	{"sluice_builder_events_waited_behind_total", "Events that waited past the builder timeout for a source still sending behind the others.", nil},
	{"sluice_builder_batches_relieved_total", "Batches the builder closed partial because a readout ring was held by their events (a ring smaller than a batch).", nil},
	{"sluice_fragments_open", "Fragments held in events still under construction.", nil},
	{"sluice_input_losses_total", "Packets or fragments lost before the builder (e.g. UDP loss, cut TCP packet), by input and reason.", []string{"input", "reason"}},
	{"sluice_fragment_payload_bytes_total", "Payload bytes of the fragments handed to the event builder: fragment and multi-fragment packet headers excluded, so less than sluice_input_wire_bytes_total.", nil},
	{"sluice_events_built_total", "Events (or timeslices) emitted by the builder, by completeness.", []string{"completeness"}},
	{"sluice_events_corrupt_total", "Built events with at least one fragment that failed its CRC.", nil},
	{"sluice_events_decided_total", "Events decided by the online trigger chain, by decision.", []string{"decision"}},
	{"sluice_events_deferred_total", "Events deferred, by reason.", []string{"reason"}},
	{"sluice_events_stored_total", "Events acknowledged by the store, by stream.", []string{"stream"}},
	{"sluice_stored_bytes_total", "Bytes of the events acknowledged by the store.", nil},
	{"sluice_events_replaced_total", "Stored events that replaced an event already stored under the same run and event id.", nil},
	{"sluice_events_dropped_total", "Events kept by the chain that could not be stored, by reason.", []string{"reason"}},
	{"sluice_queue_batches", "Event batches waiting for the trigger chain.", nil},
	{"sluice_queue_capacity_batches", "Bound of the queue of event batches before the trigger chain.", nil},
	{"sluice_queue_bytes", "Payload bytes of the event batches waiting for the trigger chain.", nil},
	{"sluice_memory_budget_bytes", "Configured memory budget of the builder and the batch queue.", nil},
	{"sluice_input_wire_bytes_total", "Bytes received per input as they arrived: whole multi-fragment packets (or native fragments) with their headers, before decoding; the fragment payloads among them are sluice_fragment_payload_bytes_total.", []string{"input"}},
	{"sluice_input_packets_total", "Packets received per input.", []string{"input"}},
	{"sluice_input_idle_seconds", "Seconds since an input last received a packet.", []string{"input"}},
	{"sluice_input_connections_open", "Connections open per network input.", []string{"input"}},
	{"sluice_input_connections_refused_total", "Connections a network input refused, by reason (tcp: max_connections, closed at once because its max_connections were open; peer: hellos refused, farm, token, version, node, accept_queue, malformed).", []string{"input", "reason"}},
	{"sluice_input_streams_lost_total", "Senders a peer input lost without a complete goodbye, by reason (reset: the connection failed or ended before the data the sender counted arrived; heartbeat: silent for peer_timeout; protocol): what they had in flight is in no other counter.", []string{"input", "reason"}},
	{"sluice_input_connections_closed_total", "Connections a tcp input accepted and that closed since, by reason (preamble_timeout: no preamble within its preamble_timeout; eof_before_preamble, eof_in_preamble: the sender closed before or inside its preamble; bad_preamble: not a readout stream; end_of_stream: a clean end; peer_closed: the sender closed without ending its stream; read_error; truncated: closed inside a record; protocol; sink_error; shutdown).", []string{"input", "reason"}},
	{"sluice_input_accept_errors_total", "Failed accepts a network input backed off from and survived, by reason (emfile: out of file descriptors).", []string{"input", "reason"}},
	{"sluice_input_fragments_flagged_total", "Fragments an input handed on flagged as a source error, by reason (a FEROL input: fed_crc, fed_error_bits, fed_header_mismatch); the builder marks their events.", []string{"input", "reason"}},
	{"sluice_input_backpressure_seconds_total", "Wall-clock seconds an input spent waiting for the event builder to take its packets, at least one of its connections waiting (its senders throttled meanwhile: ring writer waiting for space, TCP sender out of credit).", []string{"input"}},
	{"sluice_sources_silent", "Configured sources reported silent: in no event built since the inputs opened.", nil},
	{"sluice_store_writable", "1 while the store accepts writes, 0 while its disk budget refuses them.", nil},
	{"sluice_deferred_backlog_events", "Events waiting in the store's deferred stream for replay.", nil},
	{"sluice_replay_active", "1 while inter-fill replay runs inside the node.", nil},
	{"sluice_replay_events_total", "Deferred events decided by inter-fill replay, by decision.", []string{"decision"}},
	{"sluice_log_records_suppressed_total", "Log records dropped by the rate limiter.", nil},
	{"sluice_fill_beam", "1 in a fill (STABLE BEAMS), 0 in an inter-fill, as the accelerator state source says (absent: no source).", nil},
	{"sluice_fill_deferral_fraction", "Deferral fraction the fill plan set on its stage.", nil},
	{"sluice_fill_plan_reason", "What set the planned fraction: 1 for the current reason, 0 for the others.", []string{"reason"}},
	{"sluice_fill_backlog_bytes", "Bytes of the deferred backlog, as the fill plan estimates them (events times the mean stored deferred event).", nil},
	{"sluice_fill_max_backlog_bytes", "Configured cap on the deferred backlog's bytes (fill.max_backlog_bytes; 0: none, the store's headroom bounds it).", nil},
	{"sluice_fill_expected_replay_seconds", "Time the deferred backlog takes to replay at the measured replay rate.", nil},
	{"sluice_fill_next_fill_seconds", "Time until the next fill is expected to begin.", nil},
	{"sluice_fill_remaining_seconds", "In a fill, the time until it is expected to end (0 in an inter-fill).", nil},
	{"sluice_fill_inter_fill_seconds", "Length of the coming inter-fill (in one: what is left of it).", nil},
	{"sluice_fill_replay_rate_events_per_second", "Replay rate the fill plan uses (measured, at most replay.rate).", nil},
	{"sluice_fill_backlog_at_fill_start_events", "Deferred events the last inter-fill left unreplayed when the last fill began.", nil},
	{"sluice_fill_source_errors", "1 while the accelerator state source fails (the last state stands).", nil},
}

func newStatusCollector(status func() Status) *statusCollector {
	c := &statusCollector{status: status, d: map[string]*prometheus.Desc{}}
	for _, m := range metricDefs {
		c.d[m.name] = prometheus.NewDesc(m.name, m.help, m.labels, nil)
	}
	return c
}

// Describe sends every descriptor.
func (c *statusCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.d {
		ch <- d
	}
}

// Collect reads one Status and sends every metric. Per-stage trigger
// metrics (sluice_trigger_...) and store metrics (sluice_store_...) are
// registered by the plugins and storage packages on the same registry.
func (c *statusCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.status()
	l := &s.Ledger
	counter := func(name string, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.d[name], prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(name string, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.d[name], prometheus.GaugeValue, v, labels...)
	}
	byReason := func(name string, m map[string]uint64) {
		for k, v := range m {
			counter(name, v, k)
		}
	}
	for st := StateIdle; st <= StateStopped; st++ {
		v := 0.0
		if st == s.State {
			v = 1
		}
		gauge("sluice_run_state", v, st.String())
	}
	gauge("sluice_run_number", float64(s.Run))
	counter("sluice_fragments_received_total", l.FragmentsReceived)
	counter("sluice_fragments_in_events_total", l.FragmentsInEvents)
	byReason("sluice_fragments_discarded_total", l.FragmentsDiscarded)
	for s, v := range l.FragmentsSuspect {
		counter("sluice_fragments_suspect_total", v, strconv.FormatUint(uint64(s), 10))
	}
	counter("sluice_builder_resyncs_total", l.Resyncs)
	for s, v := range l.CounterResets {
		counter("sluice_source_event_id_resets_total", v, strconv.FormatUint(uint64(s), 10))
	}
	counter("sluice_builder_events_waited_behind_total", l.EventsWaitedBehind)
	counter("sluice_builder_batches_relieved_total", l.BatchesRelieved)
	gauge("sluice_fragments_open", float64(l.FragmentsOpen))
	for k, v := range l.InputLosses {
		input, reason := splitLossKey(k)
		counter("sluice_input_losses_total", v, input, reason)
	}
	counter("sluice_fragment_payload_bytes_total", l.BytesReceived)
	counter("sluice_events_built_total", l.EventsComplete, "complete")
	counter("sluice_events_built_total", l.EventsIncomplete, "incomplete")
	counter("sluice_events_corrupt_total", l.EventsCorrupt)
	counter("sluice_events_decided_total", l.EventsAccepted, "accept")
	counter("sluice_events_decided_total", l.EventsRejected, "reject")
	counter("sluice_events_decided_total", l.EventsDeferred, "defer")
	byReason("sluice_events_deferred_total", l.DeferredBy)
	counter("sluice_events_stored_total", l.EventsStoredAccepted, "accepted")
	counter("sluice_events_stored_total", l.EventsStoredDeferred, "deferred")
	counter("sluice_stored_bytes_total", l.BytesStored)
	counter("sluice_events_replaced_total", l.EventsReplaced)
	byReason("sluice_events_dropped_total", l.EventsDropped)
	b := s.Buffers
	gauge("sluice_queue_batches", float64(b.QueueBatches))
	gauge("sluice_queue_capacity_batches", float64(b.QueueCapacity))
	gauge("sluice_queue_bytes", float64(b.QueueBytes))
	gauge("sluice_memory_budget_bytes", float64(b.MemoryBudgetBytes))
	for _, in := range s.Inputs {
		counter("sluice_input_wire_bytes_total", in.Bytes, in.URI)
		counter("sluice_input_packets_total", in.Packets, in.URI)
		gauge("sluice_input_idle_seconds", in.IdleSeconds, in.URI)
		if in.Address != "" {
			gauge("sluice_input_connections_open", float64(in.Open), in.URI)
		}
		for r, v := range in.Refused {
			counter("sluice_input_connections_refused_total", v, in.URI, r)
		}
		for r, v := range in.AcceptErrors {
			counter("sluice_input_accept_errors_total", v, in.URI, r)
		}
		for r, v := range in.ConnectionsClosed {
			counter("sluice_input_connections_closed_total", v, in.URI, r)
		}
		for r, v := range in.Flagged {
			counter("sluice_input_fragments_flagged_total", v, in.URI, r)
		}
		for r, v := range in.StreamsLost {
			counter("sluice_input_streams_lost_total", v, in.URI, r)
		}
		ch <- prometheus.MustNewConstMetric(c.d["sluice_input_backpressure_seconds_total"], prometheus.CounterValue, in.BackpressureSeconds, in.URI)
	}
	gauge("sluice_sources_silent", float64(countSources(s.Warnings.SilentSources)))
	gauge("sluice_store_writable", boolFloat(s.Store.Writable))
	gauge("sluice_deferred_backlog_events", float64(s.Store.DeferredBacklog))
	gauge("sluice_replay_active", boolFloat(s.Replay.Active))
	counter("sluice_replay_events_total", s.Replay.Accepted, "accept")
	counter("sluice_replay_events_total", s.Replay.Kept, "defer")
	counter("sluice_replay_events_total", s.Replay.Events-s.Replay.Accepted-s.Replay.Kept, "reject")
	counter("sluice_log_records_suppressed_total", s.LogSuppressed)
	if f := s.Fill; f != nil {
		p := &f.Plan
		gauge("sluice_fill_beam", boolFloat(p.Beam))
		gauge("sluice_fill_deferral_fraction", p.Fraction)
		for _, r := range fill.Reasons {
			gauge("sluice_fill_plan_reason", boolFloat(r == p.Reason), string(r))
		}
		gauge("sluice_fill_backlog_bytes", float64(p.BacklogBytes))
		gauge("sluice_fill_max_backlog_bytes", float64(f.MaxBacklogBytes))
		gauge("sluice_fill_expected_replay_seconds", p.ReplaySeconds)
		gauge("sluice_fill_next_fill_seconds", p.NextFillSeconds)
		gauge("sluice_fill_remaining_seconds", p.FillRemainingSeconds)
		gauge("sluice_fill_inter_fill_seconds", p.InterFillSeconds)
		gauge("sluice_fill_replay_rate_events_per_second", p.ReplayRate)
		var left uint64
		if k := len(f.FillStarts); k > 0 {
			left = f.FillStarts[k-1].BacklogEvents
		}
		gauge("sluice_fill_backlog_at_fill_start_events", float64(left))
		gauge("sluice_fill_source_errors", boolFloat(f.SourceError != ""))
	}
}

// splitLossKey splits an InputLosses key "input/reason" at its last slash
// (input URIs contain slashes, reasons do not).
func splitLossKey(k string) (input, reason string) {
	for i := len(k) - 1; i >= 0; i-- {
		if k[i] == '/' {
			return k[:i], k[i+1:]
		}
	}
	return "", k
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// countSources is the number of sources in a source list ("" is none).
func countSources(list string) int {
	if list == "" {
		return 0
	}
	ids, err := schemas.ParseSourceList(list)
	if err != nil {
		return 0
	}
	return len(ids)
}
