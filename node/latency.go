package node

import (
	"math"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-daq/sluice/schemas"
)

// latencies are the node's latency histograms, per stage where it applies:
// what an operator sizes buffers and timeouts with. The trigger's per-stage
// plugin call time is sluice_trigger_call_duration_seconds (plugins) and
// the store's write time sluice_store_write_latency_seconds (storage).
type latencies struct {
	build, queue, chain, ack prometheus.Histogram
	endToEnd                 *prometheus.HistogramVec // by outcome: stored, rejected
}

// latencyBuckets: 100 µs to ~13 s, doubling.
var latencyBuckets = prometheus.ExponentialBuckets(100e-6, 2, 18)

func newLatencies(reg prometheus.Registerer) *latencies {
	h := func(name, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: latencyBuckets})
	}
	l := &latencies{
		build: h("sluice_event_build_seconds", "Per event: from its first fragment's arrival to the builder handing on its batch (complete events: their last fragment plus the batch latency; incomplete ones: the builder timeout). Event mode only."),
		queue: h("sluice_batch_queue_wait_seconds", "Per batch: time waiting in the queue between the builder and the trigger chain."),
		chain: h("sluice_trigger_chain_seconds", "Per batch: the whole online trigger chain's decision (every stage; one stage's plugin calls are sluice_trigger_call_duration_seconds)."),
		ack:   h("sluice_store_ack_seconds", "Per store write: from handing it to the store to its acknowledgement as durable under the sync policy."),
		endToEnd: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_event_end_to_end_seconds",
			Help:    "Per event: from its first fragment's arrival to its outcome: durable in the store (stored) or rejected by the trigger (rejected). Event mode only.",
			Buckets: latencyBuckets}, []string{"outcome"}),
	}
	l.endToEnd.WithLabelValues("stored")
	l.endToEnd.WithLabelValues("rejected")
	reg.MustRegister(l.build, l.queue, l.chain, l.ack, l.endToEnd)
	return l
}

// sinceArrival observes now minus each event's first-fragment arrival (the
// timestamp column, Unix ns) for rows (nil: every row) into h.
func sinceArrival(h prometheus.Observer, ev *schemas.EventBatch, rows []int, now time.Time) {
	if ev.Mode == schemas.ModeTimeslice {
		return // the timestamp is the timeslice's start, not an arrival
	}
	t := now.UnixNano()
	obs := func(i int) {
		if d := t - int64(ev.Timestamp(i)); d >= 0 {
			h.Observe(float64(d) / 1e9)
		}
	}
	if rows == nil {
		for i := range ev.Len() {
			obs(i)
		}
		return
	}
	for _, i := range rows {
		obs(i)
	}
}

// LatencyStatus is one latency histogram's count and quantiles (seconds),
// interpolated within buckets as Prometheus's histogram_quantile does.
type LatencyStatus struct {
	Name  string  `json:"name"`
	Count uint64  `json:"count"`
	P50   float64 `json:"p50_seconds"`
	P99   float64 `json:"p99_seconds"`
}

// status lists the histograms with their quantiles.
func (l *latencies) status() []LatencyStatus {
	out := []LatencyStatus{}
	add := func(name string, h prometheus.Histogram) {
		var m dto.Metric
		if h.Write(&m) != nil {
			return
		}
		hs := m.GetHistogram()
		out = append(out, LatencyStatus{Name: name, Count: hs.GetSampleCount(), P50: quantile(hs, 0.5), P99: quantile(hs, 0.99)})
	}
	add("event_build", l.build)
	add("batch_queue_wait", l.queue)
	add("trigger_chain", l.chain)
	add("store_ack", l.ack)
	add("end_to_end_stored", l.endToEnd.WithLabelValues("stored").(prometheus.Histogram))
	add("end_to_end_rejected", l.endToEnd.WithLabelValues("rejected").(prometheus.Histogram))
	return out
}

// quantile is the q-quantile of a histogram, linear within its bucket
// (the first bucket from 0); NaN-free: 0 when empty.
func quantile(h *dto.Histogram, q float64) float64 {
	n := h.GetSampleCount()
	if n == 0 {
		return 0
	}
	b := h.GetBucket()
	rank := q * float64(n)
	i := sort.Search(len(b), func(i int) bool { return float64(b[i].GetCumulativeCount()) >= rank })
	if i == len(b) {
		return b[len(b)-1].GetUpperBound() // beyond the last bucket: its bound
	}
	lo, below := 0.0, 0.0
	if i > 0 {
		lo, below = b[i-1].GetUpperBound(), float64(b[i-1].GetCumulativeCount())
	}
	hi, in := b[i].GetUpperBound(), float64(b[i].GetCumulativeCount())-below
	if in <= 0 || math.IsInf(hi, 1) {
		return lo
	}
	return lo + (hi-lo)*(rank-below)/in
}
