package node

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-daq/sluice/node/config"
	"github.com/sluice-daq/sluice/node/transport"
)

// TestReusedRunNumber: a second run with the same run number on the same
// store is not refused, says at start how many events of the run the store
// holds (log and /status), and counts the replaced ones.
func TestReusedRunNumber(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Sources = []config.SourceGroup{{Name: "a", Sources: "0"}}
	first := func() *Parts {
		return &Parts{Inputs: []transport.Input{&fakeInput{sources: []uint32{0}, events: 100}}, Finite: []bool{true}, Chain: &fakeChain{}}
	}
	l, _, err := runNode(t, cfg, first(), nil)
	if err != nil || l.EventsStored != 40 {
		t.Fatalf("first run: %v %s", err, l.String())
	}

	var logs strings.Builder
	var mu sync.Mutex
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	n, err := New(cfg, Options{
		Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil)),
		Open: func(ctx context.Context, cfg *config.Config, reg prometheus.Registerer, log *slog.Logger) (*Parts, error) {
			s, err := OpenStore(cfg, reg)
			if err != nil {
				return nil, err
			}
			p := first()
			p.Store, p.BatchAllocator = s, mem
			if p.RunEventsAtStart, err = countRun(s, cfg.Run); err != nil {
				return nil, err
			}
			return p, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err = n.Run(context.Background())
	mem.AssertSize(t, 0)
	if err != nil || l.EventsReplaced != 40 || !l.Balanced {
		t.Fatalf("second run: %v %s, replaced %d", err, l.String(), l.EventsReplaced)
	}
	st := n.Status()
	// Not told to rerun: the node takes it for a restart of a run that
	// did not end (Open refuses one that ended: TestRunReusedRunNumber).
	want := "run 5 already has 40 stored events in store " + cfg.Store.Dir + "; events with the same ids will replace them: resuming a run that did not end"
	if st.Store.RunEventsAtStart != 40 || !strings.HasPrefix(st.Store.Warning, want) {
		t.Fatalf("/status store %+v", st.Store)
	}
	mu.Lock()
	defer mu.Unlock()
	if c := strings.Count(logs.String(), "already has 40 stored events"); c != 1 || !strings.Contains(logs.String(), "level=WARN msg=\"run 5 already") {
		t.Fatalf("want one WARN about the reused run, got %d:\n%s", c, logs.String())
	}
	// Each replacement warning says the run's total so far (they are rate
	// limited in a node's log), the last one all of them; so does the
	// ledger's line.
	if !strings.Contains(logs.String(), "replaced_in_run=40") || !strings.Contains(l.String(), "stored events replaced 40") {
		t.Fatalf("replacement warnings without the run's total, or ledger %q:\n%s", l.String(), logs.String())
	}

	// Another run number on the same store: nothing to say.
	s, err := OpenStore(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	k, err := countRun(s, 6)
	s.Close()
	if err != nil || k != 0 {
		t.Fatalf("run 6: %d events, %v", k, err)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
