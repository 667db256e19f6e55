package control

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/farm"
)

// startEtcd runs an embedded single-member etcd with short ticks (leases
// of 1 s are granted as 1 s and expire within ~1.5 s) on free ports.
func startEtcd(t *testing.T) string {
	t.Helper()
	s, err := StartServer(ServerConfig{DataDir: t.TempDir(), Listen: "http://127.0.0.1:0", Peer: "http://127.0.0.1:0", TickMs: 20, ElectionMs: 200})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s.Endpoint()
}

// dial is one node's own connection to etcd (closing it is that node
// dying: its keep-alives stop).
func dial(t *testing.T, endpoint string) *Client {
	t.Helper()
	c, err := Dial(context.Background(), Config{Endpoints: []string{endpoint}, Farm: "test-farm", DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func join(t *testing.T, c *Client, node string) *Membership {
	t.Helper()
	ms, err := c.Join(ctxT(t), Member{Node: node, Roles: "ru,bu,em", Sources: "0-9", Address: "127.0.0.1:7000"}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func waitEvent(t *testing.T, ch <-chan MemberEvent, d time.Duration) MemberEvent {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("watch closed")
		}
		if e.Err != nil {
			t.Fatal(e.Err)
		}
		return e
	case <-time.After(d):
		t.Fatalf("no membership event within %v", d)
	}
	return MemberEvent{}
}

// TestMembershipLeaseExpiry: a node that stops renewing (its process
// died: its etcd client is gone) leaves the member list when its lease
// expires, and watchers see it leave with its record.
func TestMembershipLeaseExpiry(t *testing.T) {
	ep := startEtcd(t)
	obs := dial(t, ep)
	a := dial(t, ep)
	ms := join(t, a, "node-a")
	members, rev, err := obs.Members(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 1 || members[0].Node != "node-a" || uint64(members[0].Incarnation) != ms.Incarnation() || members[0].Sources != "0-9" {
		t.Fatalf("members %+v", members)
	}
	w := obs.WatchMembers(ctxT(t), rev)
	t0 := time.Now()
	a.Close()
	e := waitEvent(t, w, 5*time.Second)
	took := time.Since(t0)
	if !e.Left || e.Member.Node != "node-a" || uint64(e.Member.Incarnation) != ms.Incarnation() {
		t.Fatalf("event %+v", e)
	}
	// A 1 s lease with 20 ms ticks: gone after about 1-1.5 s, never before 1 s.
	if took < 900*time.Millisecond {
		t.Fatalf("lease gone after %v, before its TTL", took)
	}
	t.Logf("lease expiry seen %v after the holder stopped renewing", took)
	if members, _, _ := obs.Members(ctxT(t)); len(members) != 0 {
		t.Fatalf("members after expiry: %+v", members)
	}
}

// TestFence: revoking a node's lease removes it at once; the node sees its
// membership end; a second registration of a live node id is refused; the
// fenced node rejoins as a new incarnation.
func TestFence(t *testing.T) {
	ep := startEtcd(t)
	em := dial(t, ep)
	a := dial(t, ep)
	ms := join(t, a, "node-a")
	if _, err := em.Join(ctxT(t), Member{Node: "node-a"}, time.Second); !errors.Is(err, ErrMemberExists) {
		t.Fatalf("second join: %v, want ErrMemberExists", err)
	}
	_, rev, _ := em.Members(ctxT(t))
	w := em.WatchMembers(ctxT(t), rev)
	t0 := time.Now()
	if _, ok, err := em.Fenced(ctxT(t), ms.Incarnation()); ok || err != nil {
		t.Fatalf("fencing record before the fence: %v %v", ok, err)
	}
	if err := em.Fence(ctxT(t), ms.Incarnation(), Fencing{By: "em", Reason: "no heartbeat"}); err != nil {
		t.Fatal(err)
	}
	if f, ok, err := a.Fenced(ctxT(t), ms.Incarnation()); !ok || err != nil || f.By != "em" || f.Reason != "no heartbeat" {
		t.Fatalf("fencing record %+v %v %v", f, ok, err)
	}
	if e := waitEvent(t, w, 2*time.Second); !e.Left || uint64(e.Member.Incarnation) != ms.Incarnation() {
		t.Fatalf("event %+v", e)
	}
	select {
	case <-ms.Done():
	case <-time.After(3 * time.Second):
		t.Fatal("fenced node did not notice within 3 s")
	}
	t.Logf("fenced node noticed after %v", time.Since(t0))
	if err := em.Fence(ctxT(t), ms.Incarnation(), Fencing{}); err != nil {
		t.Fatalf("fencing twice: %v", err)
	}
	ms2 := join(t, a, "node-a")
	if ms2.Incarnation() == ms.Incarnation() {
		t.Fatal("rejoin kept the incarnation")
	}
	if e := waitEvent(t, w, 2*time.Second); e.Left || uint64(e.Member.Incarnation) != ms2.Incarnation() {
		t.Fatalf("event %+v", e)
	}
	if err := ms2.Leave(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if e := waitEvent(t, w, 2*time.Second); !e.Left {
		t.Fatalf("event %+v after leave", e)
	}
}

// TestElectionHandover: the first candidate leads with an epoch and
// reserves ids; when its process dies (its session's lease expires) the
// second takes over with a larger epoch and reserves above every id the
// first could have used; a fenced leader can reserve nothing.
func TestElectionHandover(t *testing.T) {
	ep := startEtcd(t)
	obs := dial(t, ep)
	a, b := dial(t, ep), dial(t, ep)
	msA, msB := join(t, a, "node-a"), join(t, b, "node-b")
	la, err := a.Campaign(ctxT(t), msA)
	if err != nil {
		t.Fatal(err)
	}
	blk1, err := la.Reserve(ctxT(t), 1000)
	if err != nil {
		t.Fatal(err)
	}
	blk2, err := la.Reserve(ctxT(t), 500)
	if err != nil {
		t.Fatal(err)
	}
	if blk1 != (farm.Block{First: 1, End: 1001}) || blk2 != (farm.Block{First: 1001, End: 1501}) {
		t.Fatalf("blocks %+v %+v", blk1, blk2)
	}
	if l, ok, err := obs.Leader(ctxT(t)); err != nil || !ok || l.Node != "node-a" || l.Epoch != la.Epoch() || uint64(l.Incarnation) != msA.Incarnation() {
		t.Fatalf("leader %+v %v %v", l, ok, err)
	}
	won := make(chan *Leadership, 1)
	go func() {
		lb, err := b.Campaign(ctxT(t), msB)
		if err != nil {
			t.Error(err)
		}
		won <- lb
	}()
	select {
	case <-won:
		t.Fatal("second candidate won while the first leads")
	case <-time.After(300 * time.Millisecond):
	}
	t0 := time.Now()
	a.Close() // node-a's process dies
	var lb *Leadership
	select {
	case lb = <-won:
	case <-time.After(5 * time.Second):
		t.Fatal("no handover within 5 s")
	}
	t.Logf("handover %v after the leader's death", time.Since(t0))
	if lb == nil || lb.Epoch() <= la.Epoch() {
		t.Fatalf("new epoch %v, old %d", lb, la.Epoch())
	}
	blk3, err := lb.Reserve(ctxT(t), 100)
	if err != nil {
		t.Fatal(err)
	}
	if blk3.First < blk2.End {
		t.Fatalf("new EM's block %+v starts below the old one's end %d", blk3, blk2.End)
	}
	if r, _ := obs.Reserved(ctxT(t)); r != blk3.End {
		t.Fatalf("high-water mark %d, want %d", r, blk3.End)
	}
	// Fenced, the new leader cannot reserve or publish any more.
	if err := obs.Fence(ctxT(t), msB.Incarnation(), Fencing{}); err != nil {
		t.Fatal(err)
	}
	if _, err := lb.Reserve(ctxT(t), 1); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("fenced leader reserved: %v", err)
	}
	if err := lb.PutLedger(ctxT(t), 1, farm.LedgerSummary{}); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("fenced leader published: %v", err)
	}
	if _, ok, _ := obs.Leader(ctxT(t)); ok {
		t.Fatal("a leader remains after both are gone")
	}
}

func runConfig() farm.RunConfig {
	return farm.RunConfig{Schema: farm.RunConfigSchema, Run: 42, Protocol: "push", Unit: "events", AssignmentSize: 100,
		Release: "decided", ReleaseGroup: 8,
		Sources:   []farm.SourceGroup{{Name: "velo", Sources: "0-9"}, {Name: "calo", Sources: "100,101"}},
		Plugins:   []farm.Plugin{{Stage: "hlt1", Name: "gec", Digest: "aa"}},
		Prescales: map[string]map[string]uint32{"hlt1": {"minbias": 100}}}
}

// TestRunConfig: one configuration per run; writing the same again is
// fine, a different one is refused naming every difference, and a node
// whose view differs is refused the same way.
func TestRunConfig(t *testing.T) {
	ep := startEtcd(t)
	c := dial(t, ep)
	if err := c.CheckRun(ctxT(t), runConfig()); !errors.Is(err, ErrNoRunConfig) {
		t.Fatalf("check before any config: %v", err)
	}
	if v, err := c.PutRunConfig(ctxT(t), runConfig()); err != nil || v != 1 {
		t.Fatalf("put: %d %v", v, err)
	}
	same := runConfig()
	same.Sources[0].Sources = "0-4,5-9" // the same set written differently
	if _, err := c.PutRunConfig(ctxT(t), same); err != nil {
		t.Fatalf("same config refused: %v", err)
	}
	if err := c.CheckRun(ctxT(t), same); err != nil {
		t.Fatalf("same view refused: %v", err)
	}
	mine := runConfig()
	mine.Protocol = "pull"
	mine.MaxOutstanding = 4
	mine.Plugins[0].Digest = "bb"
	mine.Sources[1].Sources = "100-102"
	mine.Prescales["hlt1"]["minbias"] = 10
	err := c.CheckRun(ctxT(t), mine)
	if !errors.Is(err, farm.ErrConfigMismatch) {
		t.Fatalf("differing view: %v", err)
	}
	for _, want := range []string{
		"protocol: farm has push, this node pull",
		"max_outstanding: farm has 0, this node 4",
		"plugins[hlt1].digest: farm has aa, this node bb",
		"sources[calo]: farm has 100-101, this node 100-102",
		"prescales[hlt1][minbias]: farm has 1 in 100, this node 1 in 10",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("mismatch error lacks %q:\n%v", want, err)
		}
	}
	if _, err := c.PutRunConfig(ctxT(t), mine); !errors.Is(err, farm.ErrConfigMismatch) {
		t.Fatalf("overwrite with another config: %v", err)
	}
	got, v, err := c.RunConfig(ctxT(t), 42)
	if err != nil || v != 1 || got.Protocol != "push" {
		t.Fatalf("stored config %+v v%d %v", got, v, err)
	}
}

// TestRunStateWatch: a node watching the run key gets the current state,
// then each change.
func TestRunStateWatch(t *testing.T) {
	ep := startEtcd(t)
	op, node := dial(t, ep), dial(t, ep)
	if _, err := op.SetRunState(ctxT(t), RunState{State: StateRunning, Run: 7, By: "test"}); err != nil {
		t.Fatal(err)
	}
	ch, errc := node.WatchRunState(ctxT(t))
	next := func() RunState {
		t.Helper()
		select {
		case st := <-ch:
			return st
		case err := <-errc:
			t.Fatal(err)
		case <-time.After(5 * time.Second):
			t.Fatal("no run state")
		}
		return RunState{}
	}
	if st := next(); st.State != StateRunning || st.Run != 7 || st.Revision == 0 {
		t.Fatalf("first state %+v", st)
	}
	if _, err := op.SetRunState(ctxT(t), RunState{State: StateStopped, Run: 7}); err != nil {
		t.Fatal(err)
	}
	if st := next(); st.State != StateStopped || st.Run != 7 {
		t.Fatalf("second state %+v", st)
	}
	if _, err := op.SetRunState(ctxT(t), RunState{State: "paused"}); err == nil {
		t.Fatal("unknown state accepted")
	}
}

// TestStatus: members, EM, run state, configuration and ledger in one read.
func TestStatus(t *testing.T) {
	ep := startEtcd(t)
	c := dial(t, ep)
	ms := join(t, c, "node-a")
	join(t, c, "node-b")
	l, err := c.Campaign(ctxT(t), ms)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutRunConfig(ctxT(t), runConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetRunState(ctxT(t), RunState{State: StateRunning, Run: 42}); err != nil {
		t.Fatal(err)
	}
	led := farm.NewLedger()
	led.Announce(farm.Unit{Run: 42, Kind: farm.UnitEvents, Ranges: []farm.Range{{First: 0, N: 10}}})
	led.Built(farm.Unit{Run: 42, Kind: farm.UnitEvents, Ranges: []farm.Range{{First: 0, N: 10}}}, "node-b", 10)
	if err := l.PutLedger(ctxT(t), 42, led.Summary()); err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Members) != 2 || st.EM == nil || st.EM.Node != "node-a" || st.Run == nil || st.Run.Run != 42 ||
		st.Config == nil || st.Config.AssignmentSize != 100 || st.Ledger == nil || !st.Ledger.Balanced || st.Ledger.PerBU["node-b"] != 10 {
		t.Fatalf("status %+v", st)
	}
}

func TestBadFarmID(t *testing.T) {
	for _, f := range []string{"", "a/b", "x y", strings.Repeat("a", 65)} {
		if _, err := Dial(context.Background(), Config{Farm: f, Endpoints: []string{"127.0.0.1:1"}}); !errors.Is(err, ErrBadFarmID) {
			t.Errorf("farm %q: %v", f, err)
		}
	}
}
