package sdk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/hashicorp/go-hclog"

	"github.com/sluice-daq/sluice/plugins/internal/pluginpb"
	"github.com/sluice-daq/sluice/plugins/internal/synthbatch"
	"github.com/sluice-daq/sluice/plugins/internal/wire"
	"github.com/sluice-daq/sluice/schemas"
)

// fake decides by event id: accept on line 1 when even, reject when odd,
// defer with a note at id 7; it panics at id panicAt and leaves row 0
// undecided when lazy.
type fake struct {
	panicAt uint64
	lazy    bool
	fail    bool
}

func (f *fake) Describe() Description {
	return Description{Name: "fake", Version: "0", Lines: []string{"a", "b"}, Columns: []string{"ecal"}}
}
func (f *fake) Configure(map[string]string) error { return nil }
func (f *fake) Decide(ev *schemas.EventBatch, out []schemas.Verdict) error {
	if f.fail {
		return errors.New("cannot decide")
	}
	for i := range out {
		id := ev.EventID(i)
		switch {
		case id == f.panicAt:
			panic("boom")
		case f.lazy && i == 0:
		case id == 7:
			out[i] = Defer("seven")
		case id%2 == 0:
			out[i] = Accept(1 << 1)
		default:
			out[i] = Reject()
		}
	}
	return nil
}

// TestServerDecide runs the gRPC service implementation directly on an
// inline batch: verdicts, lines and annotations; a panic, an error and an
// undecided row become errors naming the cause.
func TestServerDecide(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec, err := synthbatch.Synthetic(mem, synthbatch.Spec{FirstEventID: 4, Events: 6})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	buf := make([]byte, wire.StreamSize(rec))
	n, err := wire.EncodeBatch(buf, rec, mem)
	if err != nil {
		t.Fatal(err)
	}
	req := &pluginpb.DecideRequest{Batch: &pluginpb.DecideRequest_Inline{Inline: buf[:n]}}
	s := newServer(&fake{panicAt: 99}, hclog.NewNullLogger())
	d, _ := s.Describe(context.Background(), nil)
	if d.GetName() != "fake" || len(d.GetLines()) != 2 || d.GetColumns()[0] != "ecal" {
		t.Fatalf("description %v", d)
	}
	resp, err := s.Decide(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	wantV := []pluginpb.Verdict{pluginpb.Verdict_VERDICT_ACCEPT, pluginpb.Verdict_VERDICT_REJECT, pluginpb.Verdict_VERDICT_ACCEPT,
		pluginpb.Verdict_VERDICT_DEFER, pluginpb.Verdict_VERDICT_ACCEPT, pluginpb.Verdict_VERDICT_REJECT} // ids 4..9
	for i, v := range resp.GetVerdicts() {
		if v != wantV[i] || (v == pluginpb.Verdict_VERDICT_ACCEPT) != (resp.GetLines()[i] == 2) {
			t.Fatalf("row %d: %v lines %b", i, v, resp.GetLines()[i])
		}
	}
	if a := resp.GetAnnotations(); len(a) != 1 || a[0].GetRow() != 3 || a[0].GetText() != "seven" {
		t.Fatalf("annotations %v", a)
	}
	for _, c := range []struct {
		f    *fake
		says string
	}{{&fake{panicAt: 6}, "panicked: boom"}, {&fake{panicAt: 99, lazy: true}, "left event 4"}, {&fake{fail: true}, "cannot decide"}} {
		s := newServer(c.f, hclog.NewNullLogger())
		if _, err := s.Decide(context.Background(), req); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%+v: %v", c.f, err)
		}
	}
	bad := &pluginpb.DecideRequest{Batch: &pluginpb.DecideRequest_Inline{Inline: buf[:n/3]}}
	if _, err := s.Decide(context.Background(), bad); err == nil {
		t.Error("truncated batch decided")
	}
}

// recorder notes the first event id of each batch it decides and how many
// of its Decide calls ever ran at once.
type recorder struct {
	mu      sync.Mutex
	firsts  []uint64
	running atomic.Int32
	most    atomic.Int32
}

func (r *recorder) Describe() Description {
	return Description{Name: "recorder", Lines: []string{"all"}}
}
func (r *recorder) Configure(map[string]string) error { return nil }
func (r *recorder) Decide(ev *schemas.EventBatch, out []schemas.Verdict) error {
	n := r.running.Add(1)
	defer r.running.Add(-1)
	if n > r.most.Load() {
		r.most.Store(n)
	}
	time.Sleep(time.Millisecond) // room for an overlap, were there one
	r.mu.Lock()
	r.firsts = append(r.firsts, ev.EventID(0))
	r.mu.Unlock()
	for i := range out {
		out[i] = Accept(1)
	}
	return nil
}

// TestServerTakesTurns sends batches 1..8 of a pipelining host at once, in
// reverse order, and one that gives up while waiting: the trigger decides
// them one at a time in BatchSeq order, passing over the one given up.
func TestServerTakesTurns(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	const batches = 8
	reqs := make([]*pluginpb.DecideRequest, batches+1)
	for seq := 1; seq <= batches; seq++ {
		rec, err := synthbatch.Synthetic(mem, synthbatch.Spec{FirstEventID: uint64(100 * seq), Events: 3})
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, wire.StreamSize(rec))
		n, err := wire.EncodeBatch(buf, rec, mem)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		reqs[seq] = &pluginpb.DecideRequest{BatchSeq: uint64(seq), Batch: &pluginpb.DecideRequest_Inline{Inline: buf[:n]}}
	}
	r := &recorder{}
	s := newServer(r, hclog.NewNullLogger())
	// Batch 5 waits (behind 1-4, not sent yet) until its caller gives up.
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error)
	go func() {
		_, err := s.Decide(ctx, reqs[5])
		gaveUp <- err
	}()
	cancel()
	if err := <-gaveUp; err == nil {
		t.Fatal("batch 5 decided before batches 1-4 were sent")
	}
	var wg sync.WaitGroup
	for seq := batches; seq >= 1; seq-- {
		if seq == 5 {
			continue
		}
		wg.Go(func() {
			resp, err := s.Decide(context.Background(), reqs[seq])
			if err != nil || len(resp.GetVerdicts()) != 3 {
				t.Errorf("batch %d: %v %v", seq, resp, err)
			}
		})
		time.Sleep(time.Millisecond) // the later numbers arrive first
	}
	wg.Wait()
	want := []uint64{100, 200, 300, 400, 600, 700, 800}
	if fmt.Sprint(r.firsts) != fmt.Sprint(want) {
		t.Errorf("batches decided in the order of their first events %v, want %v", r.firsts, want)
	}
	if m := r.most.Load(); m != 1 {
		t.Errorf("%d Decide calls of the trigger ran at once, want 1", m)
	}
}

func TestParams(t *testing.T) {
	p := map[string]string{"a": "1.5", "b": "0x10", "c": "x"}
	if v, err := ParamFloat(p, "a", 0); err != nil || v != 1.5 {
		t.Fatal(v, err)
	}
	if v, err := ParamUint(p, "b", 0); err != nil || v != 16 {
		t.Fatal(v, err)
	}
	if v, err := ParamUint(p, "zz", 7); err != nil || v != 7 {
		t.Fatal(v, err)
	}
	if _, err := ParamFloat(p, "c", 0); err == nil || !strings.Contains(err.Error(), "parameter c") {
		t.Fatal(err)
	}
	if err := CheckParams(p, "a", "b"); err == nil || !strings.Contains(err.Error(), `"c"`) {
		t.Fatal(err)
	}
}
