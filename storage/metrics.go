package storage

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the store's Prometheus series; with no Registerer they are
// created but not registered, so the code paths do not branch on it. The
// events and bytes written are the node's sluice_events_stored_total and
// sluice_stored_bytes_total (counted from the store's acknowledgements, as
// the ledger is), not counted a second time here.
type metrics struct {
	reg        prometheus.Registerer
	cs         []prometheus.Collector
	removed    *prometheus.CounterVec
	replaced   *prometheus.CounterVec
	latency    prometheus.Histogram
	headroom   prometheus.Gauge
	gcRuns     prometheus.Counter
	gcRewrites prometheus.Counter
	refused    prometheus.Counter
	syncErrors prometheus.Counter
	direct     prometheus.GaugeFunc
}

// direct reports whether segment files are written with O_DIRECT now
// (Store.DirectWrites).
func newMetrics(reg prometheus.Registerer, direct func() bool) (*metrics, error) {
	m := &metrics{
		reg: reg,
		removed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_store_removed_events_total",
			Help: "Deferred events removed by replay commits, by outcome (accepted, rejected).",
		}, []string{"outcome"}),
		replaced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_store_replaced_events_total",
			Help: "Events written over an event already stored under the same (run, event id), by stream: resends, or event id collisions.",
		}, []string{"stream"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sluice_store_write_latency_seconds",
			Help:    "Time to write one batch (Put or replay Commit) until it is acknowledged, durable per the sync policy.",
			Buckets: prometheus.ExponentialBuckets(100e-6, 2, 16),
		}),
		headroom: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_store_headroom_bytes",
			Help: "Bytes the store may still write before the disk budget refuses writes (negative: over budget).",
		}),
		gcRuns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_store_gc_runs_total",
			Help: "Value-log garbage collection passes.",
		}),
		gcRewrites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_store_gc_rewrites_total",
			Help: "Value-log files rewritten (space reclaimed) by garbage collection.",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_store_refused_writes_total",
			Help: "Write batches refused because of the disk budget.",
		}),
		syncErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_store_sync_errors_total",
			Help: "Failed interval fsyncs (the writes stay not durable until a later one succeeds).",
		}),
		direct: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_store_direct_writes",
			Help: "1 while segment files are written with O_DIRECT; 0 while they go through the page cache (store.page_cache, or the file system refused O_DIRECT).",
		}, func() float64 {
			if direct() {
				return 1
			}
			return 0
		}),
	}
	m.cs = []prometheus.Collector{m.removed, m.replaced, m.latency, m.headroom, m.gcRuns, m.gcRewrites, m.refused, m.syncErrors, m.direct}
	if reg == nil {
		return m, nil
	}
	for i, c := range m.cs {
		if err := reg.Register(c); err != nil {
			for _, r := range m.cs[:i] {
				reg.Unregister(r)
			}
			return nil, err
		}
	}
	return m, nil
}

// unregister removes the series so that a store reopened in the same
// process can register again.
func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.cs {
		m.reg.Unregister(c)
	}
}

func (m *metrics) written(d time.Duration) {
	m.latency.Observe(d.Seconds())
}
