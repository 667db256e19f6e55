package sdk

import (
	"context"
	"errors"
	"strings"
	"testing"

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
	s := &server{t: &fake{panicAt: 99}, log: hclog.NewNullLogger()}
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
		s := &server{t: c.f, log: hclog.NewNullLogger()}
		if _, err := s.Decide(context.Background(), req); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%+v: %v", c.f, err)
		}
	}
	bad := &pluginpb.DecideRequest{Batch: &pluginpb.DecideRequest_Inline{Inline: buf[:n/3]}}
	if _, err := s.Decide(context.Background(), bad); err == nil {
		t.Error("truncated batch decided")
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
