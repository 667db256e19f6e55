package plugins

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-daq/sluice/plugins/internal/synthbatch"
	"github.com/sluice-daq/sluice/schemas"
)

// logBuffer is a goroutine-safe buffer for a test's slog output.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func testLogger() (*slog.Logger, *logBuffer) {
	buf := &logBuffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo})), buf
}

// synthetic makes batches of the emulator's events: ids first…first+events-1.
func synthetic(t testing.TB, mem memory.Allocator, first uint64, events, perBatch, fragSize int) []arrow.RecordBatch {
	t.Helper()
	var out []arrow.RecordBatch
	for done := 0; done < events; done += perBatch {
		rec, err := synthbatch.Synthetic(mem, synthbatch.Spec{FirstEventID: first + uint64(done),
			Events: min(perBatch, events-done), FragmentSize: fragSize, Seed: 11})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
	t.Cleanup(func() {
		for _, r := range out {
			r.Release()
		}
	})
	return out
}

// runChain decides every batch (sequentially) and returns the results by
// event id, failing on an event decided twice.
func runChain(t testing.TB, c *Chain, batches []arrow.RecordBatch) map[uint64]schemas.Verdict {
	t.Helper()
	out := map[uint64]schemas.Verdict{}
	for _, rec := range batches {
		res, err := decideRec(context.Background(), c, rec)
		if err != nil {
			t.Fatal(err)
		}
		collect(t, out, rec, res)
	}
	return out
}

// decideRec runs rec through c (with a view made for it).
func decideRec(ctx context.Context, c *Chain, rec arrow.RecordBatch) ([]schemas.Verdict, error) {
	ev, err := schemas.NewEventBatch(rec)
	if err != nil {
		return nil, err
	}
	return c.Decide(ctx, ev)
}

func collect(t testing.TB, out map[uint64]schemas.Verdict, rec arrow.RecordBatch, res []schemas.Verdict) {
	t.Helper()
	ev, err := schemas.NewEventBatch(rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != ev.Len() {
		t.Fatalf("%d results for %d events", len(res), ev.Len())
	}
	for i, r := range res {
		id := ev.EventID(i)
		if _, dup := out[id]; dup {
			t.Fatalf("event %d decided twice", id)
		}
		if r.Decision == schemas.DecisionNone {
			t.Fatalf("event %d left undecided", id)
		}
		out[id] = r
	}
}

// metricValue sums the series of metric name whose labels include the given
// label/value pairs.
func metricValue(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					found = found || (lp.GetName() == labels[i] && lp.GetValue() == labels[i+1])
				}
				if !found {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

// checkedMem returns an allocator that fails the test if anything allocated
// from it is still held when the test's cleanups have run.
func checkedMem(t testing.TB) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // runs after later-registered cleanups
	return mem
}
