package storage

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-daq/sluice/schemas"
)

func TestStatsAndList(t *testing.T) {
	s := openTest(t, nil)
	put(t, s, Deferred, genEvents(9, 5, 4, 1, 1000))
	put(t, s, Deferred, genEvents(7, 20, 3, 1, 1000))
	put(t, s, Accepted, genEvents(8, 1, 2, 1, 1000))
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	acc, def := st.Streams[0], st.Streams[1]
	if acc.Stream != Accepted || acc.Events != 2 || len(acc.Runs) != 1 || acc.Runs[0] != 8 {
		t.Fatalf("accepted stats %+v", acc)
	}
	if def.Events != 7 || len(def.Runs) != 2 || def.Runs[0] != 7 || def.Runs[1] != 9 {
		t.Fatalf("deferred stats %+v", def)
	}
	if def.Oldest != (Key{7, 20}) || def.Newest != (Key{9, 8}) || def.OldestTS != genEvent(7, 20, 0).ts || def.NewestTS != genEvent(9, 8, 0).ts {
		t.Fatalf("deferred oldest/newest %+v", def)
	}
	if def.Bytes < 7*1300 || st.DiskBytes == 0 || st.FreeBytes == 0 || st.Mode != schemas.ModeEvent || len(st.Groups) != 2 {
		t.Fatalf("stats %+v", st)
	}
	var ids []uint64
	err = s.List(Deferred, Selection{MinRun: 9, MinEvent: 6}, 2, func(e EventInfo) bool {
		ids = append(ids, e.Key.EventID)
		if e.Verdict.Stage != "hlt1" || e.NumFragments != 5 || e.Bytes < 1300 {
			t.Errorf("info %+v", e)
		}
		return true
	})
	if err != nil || len(ids) != 2 || ids[0] != 6 || ids[1] != 7 {
		t.Fatalf("list: %v %v, want events 6, 7", ids, err)
	}
}

// TestMetrics checks the store's series on a private registry and lints them.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	s := openTest(t, func(o *Options) { o.Registerer = reg })
	put(t, s, Deferred, genEvents(1, 0, 3, 1, 1000))
	put(t, s, Accepted, genEvents(1, 0, 2, 1, 1000))
	if _, err := s.RunGC(); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, stream string
		min, max     float64
	}{
		{"sluice_store_gc_runs_total", "", 1, 1},
		{"sluice_store_headroom_bytes", "", 1, 1e300},
		{"sluice_store_write_latency_seconds", "", 2, 2}, // sample count
	} {
		v, ok := metricValue(mfs, c.name, c.stream)
		if !ok || v < c.min || v > c.max {
			t.Errorf("%s{stream=%q} = %v (found %v), want %v..%v", c.name, c.stream, v, ok, c.min, c.max)
		}
	}
	probs, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range probs {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	// Close unregisters, so a store can be reopened on the same registry.
	dir := s.Dir()
	s.Close()
	s2, err := Open(Options{Dir: dir, MinFreeBytes: 1, Registerer: reg})
	if err != nil {
		t.Fatalf("reopen on the same registry: %v", err)
	}
	s2.Close()
}

// TestSyncInterval checks that under the interval policy an Ack is not
// durable at once and WaitDurable returns once the background fsync ran.
func TestSyncInterval(t *testing.T) {
	s := openTest(t, func(o *Options) { o.Sync, o.SyncInterval = SyncInterval, 20*time.Millisecond })
	ack := put(t, s, Deferred, genEvents(1, 0, 2, 1, 1000))
	if ack.Durable || ack.Seq == 0 {
		t.Fatalf("interval ack %+v: durable at once", ack)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitDurable(ctx, ack.Seq); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := s.WaitDurable(ctx2, ack.Seq+100); err == nil {
		t.Fatal("WaitDurable for a future write returned without error on a cancelled context")
	}
}

// metricValue returns the value of the series name{stream=stream} (any
// labels when stream is ""): counter, gauge, or a histogram's sample count.
func metricValue(mfs []*dto.MetricFamily, name, stream string) (float64, bool) {
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := stream == ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "stream" && l.GetValue() == stream {
					match = true
				}
			}
			if !match {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			}
		}
	}
	return 0, false
}
