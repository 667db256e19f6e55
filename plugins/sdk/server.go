package sdk

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-daq/sluice/plugins/internal/pluginpb"
	"github.com/sluice-daq/sluice/plugins/internal/wire"
	"github.com/sluice-daq/sluice/schemas"
)

// server serves one Trigger over the sluice.trigger.v1 gRPC service. gRPC
// runs each call in its own goroutine; the Decide calls take turns (turns),
// so the Trigger sees one batch at a time, in the host's order.
type server struct {
	pluginpb.UnimplementedTriggerServer
	t      Trigger
	log    hclog.Logger
	turns  turns
	shm    wire.Mapping // the instance's region (SharedBatch)
	arena  wire.Mapping // the host's arena (SharedLayout)
	layout wire.LayoutReader
	out    []schemas.Verdict // reused across batches
}

func newServer(t Trigger, log hclog.Logger) *server {
	s := &server{t: t, log: log}
	s.turns.cond = sync.NewCond(&s.turns.mu)
	s.turns.next = 1
	return s
}

// turns orders the Decide calls by BatchSeq: a host of
// wire.ProtocolPipelined numbers its batches 1, 2, 3, … without gaps and may
// send the next before the last is answered, and its calls can reach the
// server's goroutines in another order. A call runs when no other runs and
// its number is the next one (or one already passed: a host that numbers
// otherwise is served one call at a time, in arrival order). A call whose
// context ends while it waits gives its turn up.
type turns struct {
	mu      sync.Mutex
	cond    *sync.Cond
	busy    bool
	next    uint64              // the BatchSeq whose turn is next
	skipped map[uint64]struct{} // numbers given up while waiting, passed over when their turn comes
}

// take waits for seq's turn; it returns ctx.Err() when ctx ends first.
func (t *turns) take(ctx context.Context, seq uint64) error {
	stop := context.AfterFunc(ctx, func() {
		t.mu.Lock()
		t.cond.Broadcast()
		t.mu.Unlock()
	})
	defer stop()
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.busy || seq > t.next {
		if err := ctx.Err(); err != nil {
			if seq >= t.next {
				if t.skipped == nil {
					t.skipped = map[uint64]struct{}{}
				}
				t.skipped[seq] = struct{}{}
				t.advanceLocked()
			}
			return err
		}
		t.cond.Wait()
	}
	t.busy = true
	return nil
}

// done ends seq's turn.
func (t *turns) done(seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.busy = false
	if seq >= t.next {
		t.next = seq + 1
	}
	t.advanceLocked()
	t.cond.Broadcast()
}

func (t *turns) advanceLocked() {
	for {
		if _, ok := t.skipped[t.next]; !ok {
			return
		}
		delete(t.skipped, t.next)
		t.next++
	}
}

func (s *server) Describe(context.Context, *pluginpb.DescribeRequest) (*pluginpb.Description, error) {
	d := s.t.Describe()
	return &pluginpb.Description{Name: d.Name, Version: d.Version, Lines: d.Lines, Columns: d.Columns}, nil
}

func (s *server) Configure(_ context.Context, req *pluginpb.ConfigureRequest) (*pluginpb.ConfigureResponse, error) {
	if err := s.t.Configure(req.GetParams()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return &pluginpb.ConfigureResponse{}, nil
}

func (s *server) Decide(ctx context.Context, req *pluginpb.DecideRequest) (*pluginpb.DecideResponse, error) {
	if err := s.turns.take(ctx, req.GetBatchSeq()); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	defer s.turns.done(req.GetBatchSeq())
	if l := req.GetLayout(); l != nil {
		region, err := s.arena.View(l.GetRegion(), l.GetRegionSize(), 0, l.GetRegionSize())
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		rec, err := s.layout.Read(l, region)
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		defer rec.Release()
		out, err := s.decide(rec, req.GetBatchSeq())
		if err != nil {
			return nil, err
		}
		return encodeResults(out), nil
	}
	stream := req.GetInline()
	if sh := req.GetShared(); sh != nil {
		var err error
		if stream, err = s.shm.View(sh.GetRegion(), sh.GetRegionSize(), sh.GetOffset(), sh.GetLength()); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
	}
	rec, release, err := wire.DecodeBatch(stream)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	defer release()
	out, err := s.decide(rec, req.GetBatchSeq())
	if err != nil {
		return nil, err
	}
	return encodeResults(out), nil
}

// decide runs the author's Decide on one batch, turning a panic into an
// error so that the host sees the reason instead of a dead connection.
func (s *server) decide(rec arrow.RecordBatch, seq uint64) (out []schemas.Verdict, err error) {
	ev, err := schemas.NewEventBatch(rec)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	n := ev.Len()
	if cap(s.out) < n {
		s.out = make([]schemas.Verdict, n)
	}
	out = s.out[:n]
	clear(out)
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("trigger panicked", "batch", seq, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = status.Errorf(codes.Internal, "trigger panicked: %v", p)
		}
	}()
	if err := s.t.Decide(ev, out); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	for i, r := range out {
		if r.Decision < schemas.DecisionAccept || r.Decision > schemas.DecisionDefer {
			return nil, status.Errorf(codes.Internal, "trigger left event %d (row %d) with decision %d", ev.EventID(i), i, r.Decision)
		}
	}
	return out, nil
}

// encodeResults puts what a plugin decides on the wire: decision, lines and
// the reason's text.
func encodeResults(out []schemas.Verdict) *pluginpb.DecideResponse {
	resp := &pluginpb.DecideResponse{
		Verdicts: make([]pluginpb.Verdict, len(out)),
		Lines:    make([]uint64, len(out)),
	}
	for i, r := range out {
		resp.Verdicts[i] = pluginpb.Verdict(r.Decision) // the enum values equal schemas.Decision's
		resp.Lines[i] = r.Lines
		if r.Reason.Text != "" {
			resp.Annotations = append(resp.Annotations, &pluginpb.Annotation{Row: uint32(i), Text: r.Reason.Text})
		}
	}
	return resp
}
