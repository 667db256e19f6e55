package plugins

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-daq/sluice/plugins/sdk"
)

// metrics are the trigger host's Prometheus collectors; every series has the
// labels stage and plugin (the name the plugin gives in Describe).
type metrics struct {
	batches    *prometheus.CounterVec   // by outcome
	events     *prometheus.CounterVec   // by decision
	lineEvents *prometheus.CounterVec   // by line, after prescale
	prescaled  *prometheus.CounterVec   // by line: firings removed by the prescale
	failures   *prometheus.CounterVec   // by reason
	restarts   *prometheus.CounterVec   // by reason
	callTime   *prometheus.HistogramVec // per Decide call
	transport  *prometheus.CounterVec   // batches by transport
	up         *prometheus.GaugeVec
	backlog    *prometheus.GaugeVec

	// A stage's shadow (label stage: the production stage).
	shadowCompared      *prometheus.CounterVec
	shadowAgreeing      *prometheus.CounterVec
	shadowDiffering     *prometheus.CounterVec // by production, shadow decision
	shadowLines         *prometheus.CounterVec // by line, fired_by
	shadowSkipped       *prometheus.CounterVec // batches, by reason
	shadowSkippedEvents *prometheus.CounterVec // events, by reason
	shadowStored        *prometheus.CounterVec // differing events written to the store's shadow stream
	shadowUnstored      *prometheus.CounterVec // differing events not written, by reason
}

// Batch outcomes (label outcome of sluice_trigger_batches_total).
const (
	outcomeDecided      = "decided"       // the plugin decided the batch
	outcomeFailed       = "trigger_error" // failed K times: deferred with StatusTriggerError
	outcomeDeferBacklog = "deferred_backlog"
	outcomeDeferAll     = "deferred_fraction" // every event deferred by the fraction policy
)

// Failure and restart reasons.
const (
	reasonCrash     = "crash"     // the process died or the connection broke
	reasonDeadline  = "deadline"  // the call outlived the stage's deadline; the process was killed
	reasonError     = "error"     // the plugin returned an error (or panicked) for the batch
	reasonCancelled = "cancelled" // the caller's context ended during the call
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	l := []string{"stage", "plugin"}
	m := &metrics{
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_trigger_batches_total",
			Help: "Event batches handled by a trigger stage, by outcome (decided, trigger_error, deferred_backlog, deferred_fraction)."}, append(l, "outcome")),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_trigger_events_total",
			Help: "Events leaving a trigger stage, by decision (accept, reject, defer)."}, append(l, "decision")),
		lineEvents: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_trigger_line_events_total",
			Help: "Accepted events on which a trigger line fired, after its prescale."}, append(l, "line")),
		prescaled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_trigger_prescaled_events_total",
			Help: "Trigger line firings removed by the line's prescale."}, append(l, "line")),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_trigger_call_failures_total",
			Help: "Failed Decide calls, by reason (crash, deadline, error)."}, append(l, "reason")),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_trigger_restarts_total",
			Help: "Plugin processes restarted, by why the previous one was stopped (crash, deadline, cancelled)."}, append(l, "reason")),
		callTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_trigger_call_duration_seconds",
			Help:    "Duration of one Decide call on a plugin (batch out, decisions back).",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18)}, l),
		transport: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_trigger_transport_batches_total",
			Help: "Batches sent to plugins, by transport: layout (built in the shared arena, nothing copied), region (copied once into shared memory), inline (in the gRPC request)."}, append(l, "transport")),
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_trigger_instances_up",
			Help: "Plugin processes of a stage running and ready."}, l),
		backlog: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_trigger_backlog_events",
			Help: "Events in batches waiting for a free plugin instance."}, l),

		shadowCompared: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_trigger_shadow_compared_events_total",
			Help: "Events a stage's shadow plugin decided and the host compared with the production plugin's decision."}, []string{"stage"}),
		shadowAgreeing: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_trigger_shadow_agreeing_events_total",
			Help: "Compared events on which the shadow plugin decided as production did (same decision; for an accept, the same lines by name)."}, []string{"stage"}),
		shadowDiffering: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_trigger_shadow_differing_events_total",
			Help: "Compared events on which the shadow plugin decided otherwise, by (production, shadow) decision; accept/accept is an accept on other lines."}, []string{"stage", "production", "shadow"}),
		shadowLines: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_trigger_shadow_line_differing_events_total",
			Help: "Compared events a trigger line fired on for one side only (fired_by production or shadow)."}, []string{"stage", "line", "fired_by"}),
		shadowSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_trigger_shadow_skipped_batches_total",
			Help: "Batches not compared with the shadow plugin, by reason (queue_full: the shadow was behind; failed: it crashed, passed its deadline or erred; production_failed; stopped; released: the batch was stored before the shadow had decided it)."}, []string{"stage", "reason"}),
		shadowSkippedEvents: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_trigger_shadow_skipped_events_total",
			Help: "Events in the batches of sluice_trigger_shadow_skipped_batches_total."}, []string{"stage", "reason"}),
		shadowStored: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_trigger_shadow_stored_events_total",
			Help: "Differing events (the shadow decided otherwise than production) written to the store's shadow stream."}, []string{"stage"}),
		shadowUnstored: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_trigger_shadow_unstored_events_total",
			Help: "Differing events not written to the store's shadow stream, by reason (budget_full: the stage's shadow store_bytes reached; store_error)."}, []string{"stage", "reason"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	reg1 := func(c prometheus.Collector) prometheus.Collector {
		if err != nil {
			return c
		}
		var are prometheus.AlreadyRegisteredError
		switch e := reg.Register(c); {
		case e == nil:
		case errors.As(e, &are):
			// A second chain on the same registry (e.g. online and replay)
			// shares the collectors; its series differ by the stage label.
			return are.ExistingCollector
		default:
			err = e
		}
		return c
	}
	m.batches = reg1(m.batches).(*prometheus.CounterVec)
	m.events = reg1(m.events).(*prometheus.CounterVec)
	m.lineEvents = reg1(m.lineEvents).(*prometheus.CounterVec)
	m.prescaled = reg1(m.prescaled).(*prometheus.CounterVec)
	m.failures = reg1(m.failures).(*prometheus.CounterVec)
	m.restarts = reg1(m.restarts).(*prometheus.CounterVec)
	m.callTime = reg1(m.callTime).(*prometheus.HistogramVec)
	m.transport = reg1(m.transport).(*prometheus.CounterVec)
	m.up = reg1(m.up).(*prometheus.GaugeVec)
	m.backlog = reg1(m.backlog).(*prometheus.GaugeVec)
	m.shadowCompared = reg1(m.shadowCompared).(*prometheus.CounterVec)
	m.shadowAgreeing = reg1(m.shadowAgreeing).(*prometheus.CounterVec)
	m.shadowDiffering = reg1(m.shadowDiffering).(*prometheus.CounterVec)
	m.shadowLines = reg1(m.shadowLines).(*prometheus.CounterVec)
	m.shadowSkipped = reg1(m.shadowSkipped).(*prometheus.CounterVec)
	m.shadowSkippedEvents = reg1(m.shadowSkippedEvents).(*prometheus.CounterVec)
	m.shadowStored = reg1(m.shadowStored).(*prometheus.CounterVec)
	m.shadowUnstored = reg1(m.shadowUnstored).(*prometheus.CounterVec)
	return m, err
}

// zero creates every labelled series of a stage at 0 as soon as its plugin
// has described itself, so that a dashboard shows 0 restarts (not "no
// data") until the first one, and rate() sees the first increment.
func (m *metrics) zero(stage string, d sdk.Description) {
	for _, o := range []string{outcomeDecided, outcomeFailed, outcomeDeferBacklog, outcomeDeferAll} {
		m.batches.WithLabelValues(stage, d.Name, o)
	}
	for _, dec := range []string{"accept", "reject", "defer"} {
		m.events.WithLabelValues(stage, d.Name, dec)
	}
	for _, r := range []string{reasonCrash, reasonDeadline, reasonError, reasonCancelled} {
		m.failures.WithLabelValues(stage, d.Name, r)
		m.restarts.WithLabelValues(stage, d.Name, r)
	}
	for _, l := range d.Lines {
		m.lineEvents.WithLabelValues(stage, d.Name, l)
		m.prescaled.WithLabelValues(stage, d.Name, l)
	}
	for _, t := range []string{transportLayout, transportRegion, transportInline} {
		m.transport.WithLabelValues(stage, d.Name, t)
	}
	m.callTime.WithLabelValues(stage, d.Name)
	m.up.WithLabelValues(stage, d.Name)
	m.backlog.WithLabelValues(stage, d.Name)
}

// zeroShadow creates the series of a stage's shadow at 0: compared,
// agreeing, skipped by reason, and the decision pairs that differ.
func (m *metrics) zeroShadow(stage string) {
	m.shadowCompared.WithLabelValues(stage)
	m.shadowAgreeing.WithLabelValues(stage)
	for _, r := range skipReasons {
		m.shadowSkipped.WithLabelValues(stage, r)
		m.shadowSkippedEvents.WithLabelValues(stage, r)
	}
	m.shadowStored.WithLabelValues(stage)
	for _, r := range unstoredReasons {
		m.shadowUnstored.WithLabelValues(stage, r)
	}
	ds := []string{"accept", "reject", "defer"}
	for _, p := range ds {
		for _, s := range ds {
			if p == s && p != "accept" {
				continue // the same decision differs only as an accept on other lines
			}
			m.shadowDiffering.WithLabelValues(stage, p, s)
		}
	}
}
