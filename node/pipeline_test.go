package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-daq/sluice/node/config"
	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/plugins"
	"github.com/sluice-daq/sluice/plugins/sdk"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/storage"
)

// fakeInput sends events first, first+1, ... from every source, packing
// fragments per packet; each payload starts with its event id and source so
// tests can check where it ended up. events == 0 sends until ctx ends.
type fakeInput struct {
	sources []uint32
	first   uint64
	events  uint64
	packing int
	size    int
	// duplicateEvery > 0 sends every such packet twice.
	duplicateEvery int
	// gate, when set, is waited on before each packet (to pause a sender).
	gate func(ctx context.Context, sent uint64) error

	packets, frags, bytes atomic.Uint64
}

func (f *fakeInput) Run(ctx context.Context, sink transport.Sink) error {
	packing := max(f.packing, 1)
	n := 0
	for ev := f.first; f.events == 0 || ev < f.first+f.events; ev += uint64(packing) {
		k := packing
		if f.events != 0 {
			k = int(min(uint64(packing), f.first+f.events-ev))
		}
		for _, src := range f.sources {
			if f.gate != nil {
				if err := f.gate(ctx, f.packets.Load()); err != nil {
					return nil
				}
			}
			payloads := make([][]byte, k)
			for i := range payloads {
				p := make([]byte, max(f.size, 12))
				binary.LittleEndian.PutUint64(p, ev+uint64(i))
				binary.LittleEndian.PutUint32(p[8:], src)
				payloads[i] = p
			}
			buf := schemas.AppendMFP(nil, src, ev, 0, 3, payloads, nil)
			times := 1
			n++
			if f.duplicateEvery > 0 && n%f.duplicateEvery == 0 {
				times = 2
			}
			for range times {
				p, _, err := schemas.DecodeMFP(buf)
				if err != nil {
					return err
				}
				if err := sink.AddPacket(ctx, p, nil); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				f.packets.Add(1)
				f.frags.Add(uint64(k))
				f.bytes.Add(uint64(len(buf)))
			}
		}
		if ctx.Err() != nil {
			return nil
		}
	}
	return nil
}

func (f *fakeInput) Stats() transport.Stats {
	return transport.Stats{Packets: f.packets.Load(), Fragments: f.frags.Load(), Bytes: f.bytes.Load()}
}

func (f *fakeInput) Close() error { return nil }

// fakeChain decides by event id: id%10 == 0 accept (line 1), 1-2 defer,
// 3 defer with a trigger error, else reject. Its one stage, "hlt", counts
// what it decided.
type fakeChain struct {
	mu      sync.Mutex
	batches int
	closed  bool
	accept  bool // accept everything (for replay)
	state   plugins.StageState
}

func (c *fakeChain) Decide(ctx context.Context, eb *schemas.EventBatch) ([]schemas.Verdict, error) {
	c.mu.Lock()
	c.batches++
	c.mu.Unlock()
	out := make([]schemas.Verdict, eb.Len())
	for i := range out {
		v := schemas.Verdict{Stage: "hlt"}
		switch id := eb.EventID(i); {
		case c.accept || id%10 == 0:
			v.Decision, v.Lines = schemas.DecisionAccept, 1<<1
		case id%10 <= 2:
			v.Decision, v.Reason = schemas.DecisionDefer, schemas.Reason{Kind: schemas.ReasonFraction, Text: "fraction"}
		case id%10 == 3:
			v.Decision, v.Reason, v.Status = schemas.DecisionDefer,
				schemas.Reason{Kind: schemas.ReasonTriggerError, Text: "plugin crashed 3 times"}, schemas.StatusTriggerError
		default:
			v.Decision = schemas.DecisionReject
		}
		out[i] = v
	}
	c.mu.Lock()
	countState(&c.state, out)
	c.mu.Unlock()
	return out, nil
}

func (c *fakeChain) State() []plugins.StageState {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.state
	st.StageInfo = plugins.StageInfo{Name: "hlt", Plugin: "fake", Instances: 1, Description: sdk.Description{Name: "fakeplugin", Lines: []string{"quiet", "busy"}}}
	st.Up = 1
	st.Lines = slices.Clone(st.Lines)
	return []plugins.StageState{st}
}

func (c *fakeChain) Close() { c.mu.Lock(); c.closed = true; c.mu.Unlock() }

// countState adds verdicts of a stage to its counters, as plugins.Chain's
// stages do.
func countState(st *plugins.StageState, out []schemas.Verdict) {
	for _, v := range out {
		switch v.Decision {
		case schemas.DecisionAccept:
			st.Accepted++
			for b := range schemas.FiredLines(v.Lines, nil) {
				for len(st.Lines) <= b {
					st.Lines = append(st.Lines, 0)
				}
				st.Lines[b]++
			}
		case schemas.DecisionReject:
			st.Rejected++
			if v.Reason.Kind == schemas.ReasonPrescaled {
				st.Prescaled++
			}
		default:
			st.Deferred++
		}
	}
}

func testConfig(t *testing.T, inputs int) *config.Config {
	t.Helper()
	c := config.Default()
	c.Node.ID = "test"
	c.Run = 5
	c.Inputs = nil
	for i := range inputs {
		c.Inputs = append(c.Inputs, config.Input{URI: "shm://fake" + string(rune('a'+i))})
	}
	c.Sources = []config.SourceGroup{{Name: "a", Sources: "0-3"}, {Name: "b", Sources: "10-11"}}
	c.Builder.BatchEvents = 16
	c.Builder.BatchLatency = 5 * time.Millisecond
	c.Builder.Timeout = 200 * time.Millisecond
	c.Node.MemoryBudget = 128 << 20
	c.Store.Dir = filepath.Join(t.TempDir(), "store")
	c.Store.MinFreeBytes = 1 << 20
	c.HTTP.Address = "127.0.0.1:0"
	return c
}

// runNode runs a node with the given parts (the store opened from cfg)
// until it stops; stop, when set, is called once the node runs.
func runNode(t *testing.T, cfg *config.Config, parts *Parts, stop func(*Node)) (Ledger, *Node, error) {
	t.Helper()
	// The builder builds in mem: every batch must be released by the node.
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	n, err := New(cfg, Options{
		Logger: slog.New(slog.DiscardHandler),
		Open: func(ctx context.Context, cfg *config.Config, reg prometheus.Registerer, log *slog.Logger) (*Parts, error) {
			st, err := OpenStore(cfg, reg)
			if err != nil {
				return nil, err
			}
			parts.Store = st
			parts.BatchAllocator = mem
			return parts, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if stop != nil {
		go func() {
			for n.Status().State != StateRunning {
				time.Sleep(5 * time.Millisecond)
			}
			stop(n)
		}()
	}
	l, err := n.Run(context.Background())
	mem.AssertSize(t, 0)
	return l, n, err
}

// streamCount lists a store stream: events and their ids.
func streamCount(t *testing.T, dir string, s storage.Stream) map[uint64]storage.EventInfo {
	t.Helper()
	st, err := storage.Open(storage.Options{Dir: dir, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out := map[uint64]storage.EventInfo{}
	if err := st.List(s, storage.Selection{}, 0, func(e storage.EventInfo) bool { out[e.Key.EventID] = e; return true }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestPipelineFiniteInputsDrainBalanced(t *testing.T) {
	cfg := testConfig(t, 2)
	in1 := &fakeInput{sources: []uint32{0, 1, 2, 3}, events: 1000, packing: 4, size: 100, duplicateEvery: 50}
	in2 := &fakeInput{sources: []uint32{10, 11}, events: 1000, packing: 1, size: 300}
	chain := &fakeChain{}
	l, _, err := runNode(t, cfg, &Parts{Inputs: []transport.Input{in1, in2}, Finite: []bool{true, true}, Chain: chain}, nil)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, l.String())
	}
	if !l.Balanced || l.EventsBuilt != 1000 || l.EventsIncomplete != 0 {
		t.Fatalf("ledger: %+v", l)
	}
	// 20 of in1's 1000 packets were sent twice: 80 fragments discarded as
	// duplicates, or as late when the copy came after its event was built.
	if d := l.FragmentsDiscarded; l.FragmentsReceived != 6080 || d["duplicate"]+d["late"] != 80 || l.FragmentsInEvents != 6000 {
		t.Fatalf("fragments received %d, in events %d, discarded %v", l.FragmentsReceived, l.FragmentsInEvents, d)
	}
	if l.EventsAccepted != 100 || l.EventsDeferred != 300 || l.EventsRejected != 600 {
		t.Fatalf("decisions %d/%d/%d", l.EventsAccepted, l.EventsDeferred, l.EventsRejected)
	}
	if l.DeferredBy["hlt/fraction"] != 200 || l.DeferredBy["hlt/trigger-error"] != 100 || l.Lines["hlt/busy"] != 100 {
		t.Fatalf("deferred by %v, lines %v", l.DeferredBy, l.Lines)
	}
	if l.EventsStoredAccepted != 100 || l.EventsStoredDeferred != 300 || l.EventsStored != 400 {
		t.Fatalf("stored %d+%d", l.EventsStoredAccepted, l.EventsStoredDeferred)
	}
	if !chain.closed {
		t.Fatal("chain not closed")
	}
	acc := streamCount(t, cfg.Store.Dir, storage.Accepted)
	def := streamCount(t, cfg.Store.Dir, storage.Deferred)
	if len(acc) != 100 || len(def) != 300 {
		t.Fatalf("store holds %d accepted, %d deferred", len(acc), len(def))
	}
	for id, e := range def {
		if want := id%10 == 3; (e.Status&schemas.StatusTriggerError != 0) != want || e.Key.Run != 5 || e.NumFragments != 6 {
			t.Fatalf("deferred event %d: %+v", id, e)
		}
	}
	if _, ok := acc[990]; !ok {
		t.Fatal("event 990 not in the accepted stream")
	}
}

// The ledger shows the memory budget's split and each part's peak: the
// bounds are the config's plan, the batches' peak is what the queue held
// (no arena here), the heap's what the Go runtime held.
func TestLedgerMemorySplit(t *testing.T) {
	cfg := testConfig(t, 1)
	in := &fakeInput{sources: []uint32{0, 1, 2, 3, 10, 11}, events: 500, packing: 6, size: 4000}
	l, _, err := runNode(t, cfg, &Parts{Inputs: []transport.Input{in}, Finite: []bool{true}, Chain: &fakeChain{}}, nil)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, l.String())
	}
	m, p := l.Memory, cfg.Memory()
	if m == nil || m.BudgetBytes != 128<<20 || m.GoMemLimitBytes != p.GoMemLimit || len(m.Parts) != 5 {
		t.Fatalf("memory %+v", m)
	}
	want := map[string]uint64{"builder": p.Builder, "batches": p.Batches, "inputs": p.Inputs, "store": p.Store, "heap": p.Heap}
	var sum uint64
	for _, part := range m.Parts {
		if part.BoundBytes != want[part.Name] {
			t.Errorf("%s bound %d, want %d", part.Name, part.BoundBytes, want[part.Name])
		}
		sum += part.BoundBytes
	}
	if sum > m.BudgetBytes || p.Heap >= p.GoMemLimit {
		t.Errorf("the parts' bounds add up to %d of a %d budget; heap share %d, Go's soft limit %d", sum, m.BudgetBytes, p.Heap, p.GoMemLimit)
	}
	if b := m.Parts[1]; b.PeakBytes == 0 || b.PeakBytes > p.Batches/2 {
		t.Errorf("batches peak %d: want within the queue's half of %d", b.PeakBytes, p.Batches)
	}
	if h := m.Parts[4]; h.PeakBytes == 0 || m.PeakResidentBytes < h.PeakBytes/2 {
		t.Errorf("heap peak %d, peak resident %d", h.PeakBytes, m.PeakResidentBytes)
	}
	// The store's peak counts its O_DIRECT staging buffer (a trial read
	// 0.0 MiB for a store that had written 58 MB: nothing is mapped).
	st := m.Parts[3]
	if st.PeakBytes > st.BoundBytes || directIO(cfg.Store.Dir) && st.PeakBytes == 0 {
		t.Errorf("store peak %d, bound %d", st.PeakBytes, st.BoundBytes)
	}
}

// directIO is whether dir's file system takes O_DIRECT opens.
func directIO(dir string) bool {
	f, err := os.OpenFile(filepath.Join(dir, "odirect-probe"), os.O_CREATE|os.O_WRONLY|syscall.O_DIRECT, 0o644)
	if err != nil {
		return false
	}
	f.Close()
	return os.Remove(f.Name()) == nil
}

func TestPipelineStopDrains(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Sources = []config.SourceGroup{{Name: "a", Sources: "0-1"}}
	in := &fakeInput{sources: []uint32{0, 1}, size: 1000} // endless
	var states []State
	l, n, err := runNode(t, cfg, &Parts{Inputs: []transport.Input{in}, Finite: []bool{false}, Chain: &fakeChain{}}, func(n *Node) {
		for n.Status().Ledger.EventsStored < 200 {
			time.Sleep(5 * time.Millisecond)
		}
		states = append(states, n.Status().State)
		n.Stop()
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if !l.Balanced || l.EventsBuilt < 200 || l.EventsInFlight != 0 || l.EventsUnacked != 0 {
		t.Fatalf("ledger after stop: %+v", l)
	}
	if states[0] != StateRunning || n.Status().State != StateStopped {
		t.Fatalf("states %v then %v", states, n.Status().State)
	}
	// Every event the builder got fragments for was completed: a stopped
	// sender leaves no partial events since it sends whole events.
	if l.EventsIncomplete > 1 {
		t.Fatalf("%d incomplete events after a drain", l.EventsIncomplete)
	}
}

func TestPipelineNoOnlineStageDefersAll(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Sources = []config.SourceGroup{{Name: "a", Sources: "0-1"}}
	cfg.Store.Sync = storage.SyncInterval
	cfg.Store.SyncInterval = 20 * time.Millisecond
	in := &fakeInput{sources: []uint32{0, 1}, events: 300, packing: 3}
	l, _, err := runNode(t, cfg, &Parts{Inputs: []transport.Input{in}, Finite: []bool{true}}, nil)
	if err != nil || !l.Balanced {
		t.Fatalf("run: %v %+v", err, l)
	}
	if l.EventsDeferred != 300 || l.DeferredBy["no-online-stage"] != 300 || l.EventsStoredDeferred != 300 {
		t.Fatalf("ledger %+v", l)
	}

	// Replay the deferred events with a chain that accepts all of them.
	st, err := OpenStore(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var progress int
	s, err := Replay(context.Background(), st, &fakeChain{accept: true}, ReplayOptions{BatchEvents: 64, Progress: func(ReplaySummary) { progress++ }})
	if err != nil || !s.Balanced {
		t.Fatalf("replay: %v %+v", err, s)
	}
	if s.Selected != 300 || s.Replayed != 300 || s.Accepted != 300 || s.Remaining != 0 || s.StoreAccepted != 300 || progress != 5 {
		t.Fatalf("replay summary %+v, %d progress calls", s, progress)
	}
	// Idempotent: nothing is left to replay.
	s, err = Replay(context.Background(), st, &fakeChain{accept: true}, ReplayOptions{})
	if err != nil || s.Replayed != 0 || !s.Balanced {
		t.Fatalf("second replay %+v %v", s, err)
	}
}

func TestReplayRateAndSelection(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Sources = []config.SourceGroup{{Name: "a", Sources: "0"}}
	in := &fakeInput{sources: []uint32{0}, events: 100}
	if l, _, err := runNode(t, cfg, &Parts{Inputs: []transport.Input{in}, Finite: []bool{true}}, nil); err != nil {
		t.Fatal(err, l)
	}
	st, err := OpenStore(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	start := time.Now()
	var rates []float64
	s, err := Replay(context.Background(), st, &fakeChain{}, ReplayOptions{
		Selection: storage.Selection{MinRun: 5, MaxRun: 5, MinEvent: 10, MaxEvent: 29}, Rate: 200, BatchEvents: 5,
		Progress: func(p ReplaySummary) { rates = append(rates, float64(p.Replayed)/p.DurationSeconds) }})
	if err != nil || !s.Balanced {
		t.Fatal(err, s)
	}
	// The progress shown is the rate kept, from the first report on (not a
	// batch's burst, which the bar showed as thousands of events/s): a
	// busy machine can only lower it.
	if len(rates) != 4 || slices.Max(rates) > 200*1.05 {
		t.Fatalf("progress rates %v events/s at --rate 200", rates)
	}
	// 20 events at 200/s take >= 95 ms (the last batch is not waited for).
	if s.Selected != 20 || s.Replayed != 20 || s.Accepted != 2 || s.Rejected != 12 || s.Kept != 6 || s.Remaining != 6 || time.Since(start) < 75*time.Millisecond {
		t.Fatalf("summary %+v after %v", s, time.Since(start))
	}
	if s.KeptBy["hlt/fraction"] != 4 || s.KeptBy["hlt/trigger-error"] != 2 {
		t.Fatalf("kept by %v", s.KeptBy)
	}
}

func TestPipelineStatusWhileRunning(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Sources = []config.SourceGroup{{Name: "a", Sources: "0"}}
	in := &fakeInput{sources: []uint32{0}}
	var st Status
	l, _, err := runNode(t, cfg, &Parts{Inputs: []transport.Input{in}, Finite: []bool{false}, Chain: &fakeChain{}}, func(n *Node) {
		for n.Status().Ledger.EventsStored < 50 {
			time.Sleep(5 * time.Millisecond)
		}
		code, body := get(t, "http://"+n.HTTPAddr()+"/readyz")
		if code != 200 {
			t.Errorf("readyz %d %s", code, body)
		}
		st = n.Status()
		n.Stop()
	})
	if err != nil || !l.Balanced {
		t.Fatal(err, l)
	}
	if st.State != StateRunning || len(st.Inputs) != 1 || st.Inputs[0].Packets == 0 || st.Plugins[0].Up != 1 ||
		st.Plugins[0].Plugin != "fakeplugin" || st.Plugins[0].Binary != "fake" || // named as the metrics' plugin label
		st.Buffers.QueueCapacity != 4 || !st.Store.Writable || st.Store.HeadroomBytes <= 0 || st.Ledger.EventsStored < 50 {
		t.Fatalf("status %+v", st)
	}
}

// TestInterFillReplay: an input sends a burst then pauses; during the pause
// the node replays deferred events; when data returns replay stops.
func TestInterFillReplay(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Sources = []config.SourceGroup{{Name: "a", Sources: "0"}}
	cfg.Replay.InterFill = 150 * time.Millisecond
	release := make(chan struct{})
	in := &fakeInput{sources: []uint32{0}, events: 400, gate: func(ctx context.Context, sent uint64) error {
		if sent == 200 {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}}
	replayChain := &fakeChain{accept: true}
	var during ReplayStatus
	parts := &Parts{Inputs: []transport.Input{in}, Finite: []bool{true},
		NewReplayChain: func(context.Context) (Decider, error) { return replayChain, nil }}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	n, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler),
		Open: func(ctx context.Context, cfg *config.Config, reg prometheus.Registerer, log *slog.Logger) (*Parts, error) {
			st, err := OpenStore(cfg, reg)
			if err != nil {
				return nil, err
			}
			parts.BatchAllocator = mem
			parts.Store, parts.ReplayStore = st, st
			return parts, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if s := n.Status().Replay; s.Passes > 0 && !s.Active && s.Events > 0 {
				during = s
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		close(release)
	}()
	l, err := n.Run(context.Background())
	mem.AssertSize(t, 0)
	if err != nil || !l.Balanced {
		t.Fatal(err, l)
	}
	if during.Passes != 1 || during.Events == 0 || during.Accepted != during.Events {
		t.Fatalf("inter-fill replay during the pause: %+v", during)
	}
	if !replayChain.closed {
		t.Fatal("replay chain not closed")
	}
	// Events replayed moved to the accepted stream: online accepted ones
	// plus the replayed deferred ones.
	acc := streamCount(t, cfg.Store.Dir, storage.Accepted)
	if uint64(len(acc)) != l.EventsStoredAccepted+during.Accepted && uint64(len(acc)) < l.EventsStoredAccepted+during.Accepted {
		t.Fatalf("accepted stream %d, online %d + replayed %d", len(acc), l.EventsStoredAccepted, during.Accepted)
	}
	for _, e := range acc {
		if e.Verdict.Stage == "hlt" && e.Key.EventID%10 != 0 && e.Status&schemas.StatusReplayed == 0 {
			t.Fatalf("replayed event without the replayed status: %+v", e)
		}
	}
}

// An input that fails after its first events fails the run, whose ledger
// balances what it received.
func TestPipelineFailingInputFailsRun(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Sources = []config.SourceGroup{{Name: "a", Sources: "0"}}
	bad := &failingAfter{fakeInput: fakeInput{sources: []uint32{0}, events: 50}, err: errors.New("ring writer died")}
	l, _, err := runNode(t, cfg, &Parts{Inputs: []transport.Input{bad}, Finite: []bool{false}}, nil)
	if err == nil || !errors.Is(err, bad.err) || !l.Balanced || l.NotStarted != "" || l.EventsBuilt != 50 {
		t.Fatalf("want the input's error with a balanced ledger, got %v %+v", err, l)
	}
}

// A run whose input or emulator fails before anything was received did
// not start: its ledger says so and why (not an all-zero account that
// balances), the error is not an imbalance, and the run is not recorded as
// ended on the store (taking the same run number again is no rerun).
func TestPipelineFailureBeforeFirstEventDidNotStart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parts func(err error) *Parts
	}{
		{"input", func(err error) *Parts {
			return &Parts{Inputs: []transport.Input{&failingInput{err: err}}, Finite: []bool{false}}
		}},
		{"emulator", func(err error) *Parts {
			return &Parts{Inputs: []transport.Input{&fakeInput{sources: []uint32{0}, events: 0, gate: waitDone}},
				Finite: []bool{true}, Emulators: []func(context.Context) error{func(context.Context) error { return err }}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, 1)
			cfg.Sources = []config.SourceGroup{{Name: "a", Sources: "0"}}
			cause := errors.New("cannot open the ring")
			l, n, err := runNode(t, cfg, tc.parts(cause), nil)
			if !errors.Is(err, cause) || errors.Is(err, ErrUnbalanced) || l.Balanced || !strings.Contains(l.NotStarted, "cannot open the ring") ||
				n.Status().Ledger.NotStarted == "" {
				t.Fatalf("err %v, ledger %+v", err, l)
			}
			var b strings.Builder
			if err := l.WriteTable(&b); err != nil {
				t.Fatal(err)
			}
			if out := b.String(); !strings.HasPrefix(out, "run 5 on test did not start: ") || !strings.Contains(out, "cannot open the ring") || strings.Contains(out, "balanced") {
				t.Fatalf("table:\n%s", out)
			}
			st, err := storage.Open(storage.Options{Dir: cfg.Store.Dir, ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if _, ended, err := st.RunEnded(cfg.Run); err != nil || ended {
				t.Fatalf("run recorded as ended: %v %v", ended, err)
			}
		})
	}
}

// waitDone holds a fake input until its run ends.
func waitDone(ctx context.Context, _ uint64) error {
	<-ctx.Done()
	return ctx.Err()
}

type failingInput struct{ err error }

// failingAfter sends its fake input's events, then fails.
type failingAfter struct {
	fakeInput
	err error
}

func (f *failingAfter) Run(ctx context.Context, sink transport.Sink) error {
	if err := f.fakeInput.Run(ctx, sink); err != nil {
		return err
	}
	return f.err
}

func (f *failingInput) Run(context.Context, transport.Sink) error { return f.err }
func (f *failingInput) Stats() transport.Stats                    { return transport.Stats{} }
func (f *failingInput) Close() error                              { return nil }

// brokenChain fails every batch (not by the run being aborted).
type brokenChain struct{ fakeChain }

func (*brokenChain) Decide(context.Context, *schemas.EventBatch) ([]schemas.Verdict, error) {
	return nil, errors.New("plugin protocol violated")
}

func TestPipelineChainFailureDefersNotDrops(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Sources = []config.SourceGroup{{Name: "a", Sources: "0"}}
	in := &fakeInput{sources: []uint32{0}, events: 100}
	l, _, err := runNode(t, cfg, &Parts{Inputs: []transport.Input{in}, Finite: []bool{true}, Chain: &brokenChain{}}, nil)
	if err == nil || !strings.Contains(err.Error(), "plugin protocol violated") {
		t.Fatalf("want the chain's error, got %v", err)
	}
	if !l.Balanced || l.EventsBuilt == 0 || l.EventsDeferred != l.EventsBuilt || l.DeferredBy["trigger-error"] != l.EventsBuilt ||
		l.EventsStoredDeferred != l.EventsBuilt {
		t.Fatalf("ledger %+v", l)
	}
	def := streamCount(t, cfg.Store.Dir, storage.Deferred)
	for _, e := range def {
		if e.Status&schemas.StatusTriggerError == 0 || !strings.HasPrefix(e.Verdict.Reason.Text, "trigger-error: the trigger chain failed") {
			t.Fatalf("deferred event %+v", e)
		}
	}
}

func TestFailedStartClosesWhatOpened(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Builder.MaxOpenEvents = -1 // the builder refuses it after the parts opened
	chain := &fakeChain{}
	l, n, err := runNode(t, cfg, &Parts{Inputs: []transport.Input{&fakeInput{sources: []uint32{0}}}, Chain: chain}, nil)
	if err == nil || !chain.closed || n.Status().State != StateStopped || l.Balanced || l.NotStarted == "" || l.FragmentsReceived != 0 {
		t.Fatalf("err %v, chain closed %v, state %v, ledger %+v", err, chain.closed, n.Status().State, l)
	}
	// The ledger says the run did not start, and why; not an all-zero
	// account that reads "balanced yes".
	var b strings.Builder
	if err := l.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "run 5 on test did not start: ") || strings.Contains(out, "balanced") {
		t.Fatalf("table of a run that did not start:\n%s", out)
	}
}

// budgetStore refuses the first puts for the disk budget, then becomes
// writable again after a while, as the store's guard does.
type budgetStore struct {
	eventStore
	mu       sync.Mutex
	refusals int
	writable chan struct{}
	refused  int
}

func (s *budgetStore) Put(stream storage.Stream, b *schemas.EventBatch, verdicts []schemas.Verdict, rows []int) (storage.Ack, error) {
	s.mu.Lock()
	if s.refused < s.refusals {
		s.refused++
		s.mu.Unlock()
		return storage.Ack{}, &storage.DiskBudgetError{Dir: "x", Need: 1, Free: 0, MinFree: 1}
	}
	s.mu.Unlock()
	return s.eventStore.Put(stream, b, verdicts, rows)
}

func (s *budgetStore) Writable() <-chan struct{} { return s.writable }

func TestDiskBudgetHoldsThePipeline(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Sources = []config.SourceGroup{{Name: "a", Sources: "0"}}
	in := &fakeInput{sources: []uint32{0}, events: 200}
	writable := make(chan struct{})
	time.AfterFunc(150*time.Millisecond, func() { close(writable) })
	cfg.Warnings.Interval = 40 * time.Millisecond // the hold's reminders
	var bs *budgetStore
	var logs strings.Builder
	var mu sync.Mutex
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	n, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil)),
		Open: func(ctx context.Context, cfg *config.Config, reg prometheus.Registerer, log *slog.Logger) (*Parts, error) {
			st, err := OpenStore(cfg, reg)
			if err != nil {
				return nil, err
			}
			bs = &budgetStore{eventStore: st, refusals: 3, writable: writable}
			return &Parts{Inputs: []transport.Input{in}, Finite: []bool{true}, Store: bs, BatchAllocator: mem}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	l, err := n.Run(context.Background())
	mem.AssertSize(t, 0)
	if err != nil || !l.Balanced || l.EventsStored != 200 || sum(l.EventsDropped) != 0 || bs.refused != 3 {
		t.Fatalf("err %v, refused %d, ledger %+v", err, bs.refused, l)
	}
	if time.Since(start) < 150*time.Millisecond {
		t.Fatal("the pipeline did not wait for the store to become writable")
	}
	// The hold is logged when it begins, reminded while it lasts (every
	// warnings.interval: a node that stopped storing does not go quiet)
	// and its end logged.
	mu.Lock()
	defer mu.Unlock()
	out := logs.String()
	if !strings.Contains(out, `level=WARN msg="store refuses writes: disk budget reached; holding the pipeline"`) ||
		!strings.Contains(out, `level=WARN msg="store still refuses writes: the pipeline is held"`) ||
		!strings.Contains(out, `level=INFO msg="store writable again: the pipeline goes on"`) ||
		!strings.Contains(out, "held_seconds=") || !strings.Contains(out, "what_to_do=") ||
		!strings.Contains(out, "store.min_free_bytes (1 B)") || strings.Contains(out, "store.max_bytes") {
		t.Fatalf("log of the hold:\n%s", out)
	}
}

// TestHoldHint: the hold's advice names the limit that refused, with its
// figures, and says what a stop does before a drain and when the node
// gives up during one.
func TestHoldHint(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Node.DrainTimeout = 90 * time.Second
	n := &Node{cfg: cfg, rc: newRunControl(nil)}
	size := n.holdHint(&storage.DiskBudgetError{Size: 3 << 30, MaxSize: 3 << 30, Need: 1, BySizeCap: true})
	free := n.holdHint(fmt.Errorf("store put: %w", &storage.DiskBudgetError{Free: 100 << 20, MinFree: 256 << 20, Need: 1}))
	for _, c := range []struct{ got, want, not string }{
		{size, "raise store.max_bytes (the store holds 3.0 GiB of its 3.0 GiB)", "min_free_bytes"},
		{free, "free space on the store's file system (100 MiB free) or lower store.min_free_bytes (256 MiB)", "max_bytes"},
		{free, "a stop (SIGTERM) drains for node.drain_timeout (1m30s)", "is draining"},
	} {
		if !strings.Contains(c.got, c.want) || strings.Contains(c.got, c.not) {
			t.Errorf("hint %q: want %q, not %q", c.got, c.want, c.not)
		}
	}
	n.rc.requestDrain()
	if got := n.holdHint(storage.ErrDiskBudget); !strings.Contains(got, "the node is draining: node.drain_timeout (1m30s) after the drain began") || strings.Contains(got, "SIGTERM") {
		t.Errorf("hint during a drain: %q", got)
	}
}

// TestDrainWithStoreRefusingWrites: a drain whose store refuses every
// write (disk budget, never lifted) ends after node.drain_timeout: the
// events held are counted not_stored_at_drain with their ids, the ledger
// balances and the run fails saying so (it used to wait forever).
func TestDrainWithStoreRefusingWrites(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Sources = []config.SourceGroup{{Name: "a", Sources: "0"}}
	cfg.Node.DrainTimeout = 200 * time.Millisecond
	in := &fakeInput{sources: []uint32{0}, events: 100}
	var logs strings.Builder
	var mu sync.Mutex
	n, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil)),
		Open: func(ctx context.Context, cfg *config.Config, reg prometheus.Registerer, log *slog.Logger) (*Parts, error) {
			st, err := OpenStore(cfg, reg)
			if err != nil {
				return nil, err
			}
			bs := &budgetStore{eventStore: st, refusals: math.MaxInt, writable: make(chan struct{})}
			return &Parts{Inputs: []transport.Input{in}, Finite: []bool{true}, Store: bs}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var l Ledger
	go func() { l, err = n.Run(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the drain did not end with the store refusing writes")
	}
	if err == nil || !strings.Contains(err.Error(), "not_stored_at_drain") {
		t.Fatalf("run error %v, want the events not stored at drain named", err)
	}
	ids := slices.Sorted(slices.Values(l.NotStoredAtDrain))
	if !l.Balanced || l.EventsStored != 0 || l.EventsDropped[reasonNotStoredAtDrain] != 100 || len(ids) != 100 || ids[0] != 0 || ids[99] != 99 {
		t.Fatalf("ledger %+v", l)
	}
	// One hold, logged once: the batches the drain gives up on after the
	// timeout are not each announced as a new hold (they were, after the
	// run's error).
	mu.Lock()
	defer mu.Unlock()
	if c := strings.Count(logs.String(), "holding the pipeline"); c != 1 {
		t.Fatalf("%d hold warnings, want 1:\n%s", c, logs.String())
	}
}

// TestTimesliceMode: fragments keyed by timestamps (ns) are built into
// timeslices of the configured length.
func TestTimesliceMode(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Sources = []config.SourceGroup{{Name: "a", Sources: "0-1"}}
	cfg.Builder.Mode = "timeslice"
	cfg.Builder.SliceDuration = 100 * time.Nanosecond
	in := &fakeInput{sources: []uint32{0, 1}, events: 1000, packing: 50}
	l, _, err := runNode(t, cfg, &Parts{Inputs: []transport.Input{in}, Finite: []bool{true}}, nil)
	if err != nil || !l.Balanced {
		t.Fatal(err, l)
	}
	if l.EventsBuilt != 10 || l.FragmentsInEvents != 2000 || l.EventsStoredDeferred != 10 {
		t.Fatalf("want 10 timeslices of 200 fragments, ledger %+v", l)
	}
}

// cancelChain is a chain that ends the replay's context (as Ctrl-C does)
// right after deciding its at-th batch, before the batch is committed.
type cancelChain struct {
	*fakeChain
	at, n  int
	cancel context.CancelFunc
}

func (c *cancelChain) Decide(ctx context.Context, eb *schemas.EventBatch) ([]schemas.Verdict, error) {
	v, err := c.fakeChain.Decide(ctx, eb)
	if c.n++; c.n == c.at {
		c.cancel()
	}
	return v, err
}

// TestReplayInterruptedBalances: a replay stopped at random points (the
// signal arriving between a batch's decision and its commit's sync) ends
// balanced with the store's ledger every time, and the replays together
// decide every deferred event once.
func TestReplayInterruptedBalances(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Sources = []config.SourceGroup{{Name: "a", Sources: "0-1"}}
	cfg.Store.Sync = storage.SyncInterval // commits are not durable at once
	cfg.Store.SyncInterval = 20 * time.Millisecond
	in := &fakeInput{sources: []uint32{0, 1}, events: 300, packing: 3}
	if l, _, err := runNode(t, cfg, &Parts{Inputs: []transport.Input{in}, Finite: []bool{true}}, nil); err != nil || l.EventsStoredDeferred != 300 {
		t.Fatalf("run: %v %+v", err, l)
	}
	st, err := OpenStore(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rng := rand.New(rand.NewPCG(14, 3))
	var replayed uint64
	for round := 0; replayed < 300; round++ {
		if round > 40 {
			t.Fatalf("%d of 300 replayed after %d rounds", replayed, round)
		}
		ctx, cancel := context.WithCancel(context.Background())
		chain := &cancelChain{fakeChain: &fakeChain{accept: true}, at: 1 + rng.IntN(4), cancel: cancel}
		s, err := Replay(ctx, st, chain, ReplayOptions{BatchEvents: 10})
		cancel()
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: %v", round, err)
		}
		if !s.Balanced || s.Replayed != s.StoreAccepted || s.Replayed == 0 {
			t.Fatalf("round %d (stopped after batch %d): summary does not balance with the store: %+v", round, chain.at, s)
		}
		replayed += s.Replayed
	}
	if replayed != 300 {
		t.Fatalf("%d events replayed, want each of 300 once", replayed)
	}
	if l, err := st.Ledger(); err != nil || l.Accepted != 300 {
		t.Fatalf("store ledger %+v %v", l, err)
	}
}

// The ledger's flow is the data's: from the first fragment to the last
// batch finished with. An input that waits before its first packet (a
// board not yet sending) lengthens the run, not the flow.
func TestLedgerFlowSeconds(t *testing.T) {
	const wait = 300 * time.Millisecond
	cfg := testConfig(t, 1)
	in := &fakeInput{sources: []uint32{0, 1, 2, 3, 10, 11}, events: 500, packing: 5, size: 1000,
		gate: func(ctx context.Context, sent uint64) error {
			if sent == 0 {
				select {
				case <-time.After(wait):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		}}
	l, _, err := runNode(t, cfg, &Parts{Inputs: []transport.Input{in}, Finite: []bool{true}, Chain: &fakeChain{}}, nil)
	if err != nil || !l.Balanced || l.EventsBuilt != 500 {
		t.Fatalf("run: %v\n%s", err, l.String())
	}
	run := l.DurationSeconds - l.StartupSeconds
	if l.FlowSeconds <= 0 || l.FlowSeconds > run-wait.Seconds() {
		t.Fatalf("flow %.3f s of a %.3f s run whose first %.1f s had no data: want 0 < flow <= run - wait", l.FlowSeconds, run, wait.Seconds())
	}
}
