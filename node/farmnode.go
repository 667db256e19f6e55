package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-daq/sluice/builder"
	"github.com/sluice-daq/sluice/node/farm"
	"github.com/sluice-daq/sluice/node/farm/agent"
	farmctl "github.com/sluice-daq/sluice/node/farm/control"
	"github.com/sluice-daq/sluice/node/peer"
	_ "github.com/sluice-daq/sluice/node/peer/tcp" // registers "tcp"
	_ "github.com/sluice-daq/sluice/node/peer/ucx" // registers "ucx" when built with the ucx tag
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/storage"
)

// farmNode is the node's part in a farm (config farm.id set): its readout
// inputs feed the agent's RU side (the agent is their Sink) and the
// agent's BU side hands complete assignments to the node's own builder →
// trigger chain → store path (farmNode is the agent's Pipeline). The
// builder runs in assigned mode: each assignment's event ids are given to
// it (Builder.Expect) before its fragments, and it reports each one done
// (builder.Config.OnAssignmentDone) with the events it built, however
// late or out of order the assignment came (a reassigned range after a
// failover is old by design). farmNode reports each assignment decided
// once all its built events are decided, and durable once the store
// synced them (release policy durable).
//
// Fragments reach the builder one by one, only those whose event id is in
// their assignment: the rest of a packet belongs to other assignments
// (packets are the RU's packing, not the EM's) and is counted as
// outside_assignment, never built twice.
type farmNode struct {
	n   *Node
	log *slog.Logger
	b   *builder.Builder
	// agent is the current incarnation's (a BU-only node fenced comes
	// back with a new one: see rejoin); acfg makes the next.
	agent  atomic.Pointer[agent.Agent]
	acfg   agent.Config
	roles  farm.Roles
	ctl    *farmctl.Client
	tr     peer.Transport
	policy farm.Outcome
	wait   time.Duration // an assignment not settled this long after its build is given up on

	jobs chan farmJob

	mu      sync.Mutex
	byEvent map[uint64]*farmAssign // event id → its live assignment
	live    map[uint64]*farmAssign
	stats   FarmLedger
	// runState is the farm's desired state of this run (see FarmStatus).
	runState string
	// drained: run's done channel closed because this node was asked to
	// drain and leave (sluice farm drain), not because the run stopped.
	drained atomic.Bool
}

// FarmLedger is the farm part of a node's ledger: what its BU pipeline did
// with the assignments it was given.
type FarmLedger struct {
	Node        string `json:"node"`
	Roles       string `json:"roles"`
	Assignments uint64 `json:"assignments"` // handed to the builder
	Decided     uint64 `json:"assignments_decided"`
	Durable     uint64 `json:"assignments_durable,omitempty"`
	// GivenUp: assignments whose events were not all decided within the
	// wait, or that the builder refused: reported decided with the events
	// that were.
	GivenUp   uint64 `json:"assignments_given_up"`
	Events    uint64 `json:"events_expected"` // event ids with at least one fragment
	Fragments uint64 `json:"fragments_fed"`
	// OutsideAssignment: fragments of the packets an RU sent for an
	// assignment whose event ids are in another assignment (sent to its
	// BU too): not given to this builder.
	OutsideAssignment uint64 `json:"fragments_outside_assignment"`
	// Unassigned: decided events whose id is in no live assignment here.
	Unassigned uint64 `json:"events_unassigned"`
	// SplitEvents (unit: packets): event ids of an assignment that some
	// source's packets for it lacked — the sources' packing is not
	// aligned, so those events are built incomplete (counted there too).
	SplitEvents uint64 `json:"events_split_across_packets,omitempty"`
	// Unbuilt: event ids of its assignments that no RU sent anything for
	// (no event built; the farm ledger counts them lost, timed_out).
	Unbuilt uint64 `json:"events_unbuilt,omitempty"`
	// Missing: the sources assignments were built without (their RU died
	// or was masked, or the RU's own wait gave up on them), by source list,
	// with the event ids: their fragments are lost.
	Missing []FarmMissing `json:"missing,omitempty"`
	// Fenced: times this node found its membership revoked (and came
	// back as a new incarnation); Voided: events it had stored for
	// assignments the EM gave to other BUs after declaring an earlier
	// incarnation dead, moved to the store's void stream and reported to
	// the EM as duplicate_after_failover.
	Fenced uint64       `json:"fenced,omitempty"`
	Voided uint64       `json:"events_voided,omitempty"`
	Agent  agent.Status `json:"agent"`
}

// FarmMissing is one set of sources assignments were built without.
type FarmMissing struct {
	Sources     string `json:"sources"`     // a source list
	Assignments uint64 `json:"assignments"` // built without them
	Events      uint64 `json:"events"`      // event ids of those assignments
	Fragments   uint64 `json:"fragments"`   // Events × the sources: fragments lost
	// IDs are the event ids (the first maxMissingIDs ranges).
	IDs []farm.Range `json:"ids"`
}

const maxMissingIDs = 64

// farmJob is one assignment to build.
type farmJob struct {
	a       farm.Assign
	packets []schemas.MFP
	missing []uint32
	release func()
}

// farmAssign tracks one assignment from build to its outcome.
type farmAssign struct {
	id  uint64
	ag  *agent.Agent // the incarnation it was built for
	ids []uint64     // event ids with at least one fragment, ascending
	// want is the events the builder built of it (-1 until it reported
	// the assignment done): decided and durable are counted against it.
	want     int
	decided  int
	durable  int
	reported farm.Outcome
	at       time.Time
}

// rxPoolRUOnly is the receive pool of an RU-only node's transport: it
// receives control messages only, no data.
const rxPoolRUOnly = 1 << 20

// minSendPool is the send pool of a BU-only node's agent (it sends no
// data): one slot.
const minSendPool = 64 << 10

// startFarm opens the farm part of the node: etcd, the peer transport and
// the agent (not yet running: see run).
func (n *Node) startFarm(ctx context.Context, b *builder.Builder) (*farmNode, error) {
	fc := n.cfg.Farm
	roles, err := fc.ParsedRoles()
	if err != nil {
		return nil, err
	}
	tok, err := fc.Token()
	if err != nil {
		return nil, fmt.Errorf("farm.token_file: %w", err)
	}
	rc, err := FarmRunConfig(n.cfg)
	if err != nil {
		return nil, fmt.Errorf("farm: run configuration: %w", err)
	}
	policy, _ := farm.ParseOutcome(fc.Release) // Validate checked it
	var sources []uint32
	if roles&farm.RoleRU != 0 {
		sources, _ = schemas.ParseSourceList(fc.Sources) // Validate checked it
	}
	ctl, err := farmctl.Dial(ctx, farmctl.Config{Endpoints: fc.Etcd, Farm: fc.ID})
	if err != nil {
		return nil, fmt.Errorf("farm: etcd %v: %w", fc.Etcd, err)
	}
	// The peer transport's receive pool and the agent's send pool are the
	// budget's farm part (node.memory_split.farm, split by roles). One data
	// message (an RU's part of one assignment) may take a quarter of the
	// receive pool; the BU credits at most the pool's bytes.
	plan := n.cfg.Memory()
	pool := int64(plan.FarmReceive)
	if pool == 0 {
		pool = rxPoolRUOnly
	}
	tr, err := peer.Open(fc.Transport, peer.Config{Node: n.cfg.Node.ID, Farm: fc.ID, Token: tok,
		Listen: fc.Listen, Advertise: fc.Advertise, PoolBytes: pool, MaxData: int(min(pool/4, peer.DefaultMaxData)),
		PeerTimeout: fc.PeerTimeout, Heartbeat: fc.PeerTimeout / 5})
	if err != nil {
		ctl.Close()
		return nil, fmt.Errorf("farm: peer transport %s: %w", fc.Transport, err)
	}
	f := &farmNode{n: n, log: n.log.With("farm", fc.ID), b: b, ctl: ctl, tr: tr, policy: policy,
		wait: n.cfg.Builder.Timeout + 2*fc.Wait + 5*time.Second, jobs: make(chan farmJob, 4096),
		byEvent: map[uint64]*farmAssign{}, live: map[uint64]*farmAssign{},
		stats: FarmLedger{Node: n.cfg.Node.ID, Roles: roles.String()}}
	var pipe agent.Pipeline
	if roles&farm.RoleBU != 0 {
		pipe = f
	}
	f.roles = roles
	f.acfg = agent.Config{Node: n.cfg.Node.ID, Roles: roles, Sources: sources,
		TriggerSource: fc.TriggerSource, Run: rc, Control: ctl, Transport: tr, HTTP: n.httpAdvertised(), Token: tok, LeaseTTL: fc.LeaseTTL,
		Wait: fc.Wait, BehindWait: n.cfg.Builder.BehindWait, BehindLimit: fc.BehindLimit, SendPool: int(max(plan.FarmSend, minSendPool)), SlotBytes: max(int64(plan.FarmReceive), 1),
		Pipeline: pipe, Log: n.log}
	ag, err := agent.New(f.acfg)
	if err != nil {
		f.close()
		return nil, err
	}
	f.agent.Store(ag)
	f.log.Info("farm node", "roles", roles.String(), "transport", tr.Name(), "addr", tr.Addr(),
		"protocol", fc.Protocol, "release", fc.Release, "sources", fc.Sources)
	return f, nil
}

// httpAdvertised is the node's HTTP endpoint as other hosts reach it
// (registered for Prometheus's service discovery): the listening address,
// its host replaced when it is unspecified (0.0.0.0, [::]) by
// farm.advertise's host, else this machine's host name; "" without an
// HTTP endpoint.
func (n *Node) httpAdvertised() string {
	n.mu.Lock()
	srv := n.httpSrv
	n.mu.Unlock()
	if srv == nil {
		return ""
	}
	host, port, err := net.SplitHostPort(srv.Addr())
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = ""
		if h, _, err := net.SplitHostPort(n.cfg.Farm.Advertise); err == nil && h != "" {
			host = h
		} else if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	return net.JoinHostPort(host, port)
}

func (f *farmNode) close() {
	_ = f.tr.Close()
	_ = f.ctl.Close()
}

// Build is the agent's Pipeline: it queues the assignment for the feeder
// (it runs on the agent's loop and must not block on the builder). The
// queue never fills: the BU's credits bound its assignments in flight.
func (f *farmNode) Build(a farm.Assign, packets []schemas.MFP, missing []uint32, release func()) {
	select {
	case f.jobs <- farmJob{a: a, packets: packets, missing: missing, release: release}:
	default:
		go func() { f.jobs <- farmJob{a: a, packets: packets, missing: missing, release: release} }()
	}
}

// feed hands queued assignments' fragments to the builder until ctx ends.
func (f *farmNode) feed(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-f.jobs:
			f.feedOne(ctx, j)
		}
	}
}

// inUnit reports whether event id belongs to an assignment of unit u. In
// units of packets (the readout's packing: each source's k-th
// multi-fragment packet) every fragment of the packets sent for it does;
// in units of events, the ids in u's ranges (ascending).
func inUnit(u farm.Unit, id uint64) bool {
	if u.Kind == farm.UnitPackets {
		return true
	}
	for _, r := range u.Ranges {
		if id < r.First {
			return false
		}
		if id <= r.Last() {
			return true
		}
	}
	return false
}

// splitEvents counts, in an assignment of packets, the event ids that
// some source sending packets for it did not carry (of ids, the number of
// distinct event ids in the packets): with aligned packing (every
// source's k-th packet holds the same events, as LHCb's MEPs) it is 0.
func splitEvents(packets []schemas.MFP, ids int) int {
	per := map[uint32]int{}
	for _, p := range packets {
		per[p.SourceID] += int(p.N)
	}
	split := 0
	for _, n := range per {
		split = max(split, ids-n)
	}
	return split
}

func (f *farmNode) feedOne(ctx context.Context, j farmJob) {
	if len(j.missing) > 0 {
		f.log.Warn("farm: assignment built without some sources", "assignment", j.a.ID, "missing", j.missing)
	}
	fa := &farmAssign{id: j.a.ID, ag: f.agent.Load(), at: time.Now(), want: -1}
	seen := map[uint64]bool{}
	frags, outside := 0, uint64(0)
	for _, p := range j.packets {
		p.Fragments(func(_ int, id uint64, _ uint32, _ []byte) bool {
			if inUnit(j.a.Unit, id) {
				frags++
				if !seen[id] {
					seen[id] = true
					fa.ids = append(fa.ids, id)
				}
			} else {
				outside++
			}
			return true
		})
	}
	split := 0
	if j.a.Unit.Kind == farm.UnitPackets {
		split = splitEvents(j.packets, len(fa.ids))
		if split > 0 {
			f.log.Warn("farm: the packets of an assignment do not carry the same events from every source: the readout's packing is not aligned across sources (unit: packets needs it), so those events are split across assignments and built incomplete",
				"assignment", j.a.ID, "events", len(fa.ids), "split", split)
		}
	}
	slices.Sort(fa.ids)
	var unbuilt []farm.Range
	if j.a.Unit.Kind == farm.UnitEvents && len(fa.ids) > 0 && len(fa.ids) < j.a.Unit.Len() {
		// Ids no RU sent anything for: no event for them. The EM counts
		// them lost, not built (the release names them).
		unbuilt = farm.UnitGaps(j.a.Unit, fa.ids)
		_ = fa.ag.Unbuilt(ctx, fa.id, unbuilt)
	}
	f.mu.Lock()
	for _, r := range unbuilt {
		f.stats.Unbuilt += uint64(r.N)
	}
	f.stats.SplitEvents += uint64(split)
	f.countMissing(j, fa.ids)
	f.stats.Assignments++
	f.stats.Events += uint64(len(fa.ids))
	f.stats.Fragments += uint64(frags)
	f.stats.OutsideAssignment += outside
	// An event split across two assignments of packets (misaligned
	// packing) may be expected here already: its fragments join it there.
	fa.ids = slices.DeleteFunc(fa.ids, func(id uint64) bool { return f.byEvent[id] != nil })
	f.mu.Unlock()
	if len(fa.ids) == 0 {
		j.release()
		fa.want = 0
		f.report(fa, farm.OutcomeDurable, 0)
		return
	}
	// The events' provenance names this BU incarnation (the assignment
	// id comes with each event from the builder).
	if st, ok := f.n.parts.Store.(buildUnitSetter); ok {
		st.SetBuildUnit(j.a.BU, j.a.Incarnation)
	}
	// The builder expects the ids that have fragments: it reports the
	// assignment done once each is built (ids without any fragment have
	// nothing to wait for).
	if err := f.b.Expect(builder.Assignment{ID: fa.id, Ranges: idRanges(fa.ids)}); err != nil {
		j.release()
		f.log.Error("farm: the builder refused an assignment; reported given up", "assignment", fa.id, "err", err)
		fa.want = 0
		f.mu.Lock()
		f.stats.GivenUp++
		f.mu.Unlock()
		f.report(fa, farm.OutcomeDurable, 0)
		return
	}
	f.mu.Lock()
	f.live[fa.id] = fa
	for _, id := range fa.ids {
		f.byEvent[id] = fa
	}
	f.mu.Unlock()
	// One reference per fragment given to the builder plus ours: the RU's
	// receive buffers go back once the builder copied (or discarded) all.
	var refs sync.WaitGroup
	refs.Add(frags + 1)
	go func() { refs.Wait(); j.release() }()
	done := func() { refs.Done() }
	for _, p := range j.packets {
		p.Fragments(func(_ int, id uint64, crc uint32, pl []byte) bool {
			if !inUnit(j.a.Unit, id) {
				return true
			}
			fr := schemas.Fragment{SourceID: p.SourceID, EventID: id, Flags: p.Flags, CRC: crc, Payload: pl}
			if err := f.b.AddFragment(ctx, fr, done); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, builder.ErrClosed) {
				f.log.Warn("farm: builder refused a fragment", "assignment", j.a.ID, "source", p.SourceID, "event", id, "err", err)
			}
			return true
		})
	}
	refs.Done()
	// Every fragment of it that will come was given (the agent's BU hands
	// an assignment over once every RU sent, died, or the wait ended): the
	// builder emits its events now, incomplete without the sources that
	// did not send, instead of each waiting for the builder's timeout.
	if err := f.b.Seal(fa.id); err != nil {
		f.log.Warn("farm: seal", "assignment", fa.id, "err", err)
	}
}

// countMissing adds an assignment built without some sources to the
// ledger's missing part (under f.mu): ids are its event ids with
// fragments.
func (f *farmNode) countMissing(j farmJob, ids []uint64) {
	if len(j.missing) == 0 {
		return
	}
	srcs := schemas.FormatSourceList(j.missing)
	var m *FarmMissing
	for i := range f.stats.Missing {
		if f.stats.Missing[i].Sources == srcs {
			m = &f.stats.Missing[i]
		}
	}
	if m == nil {
		f.stats.Missing = append(f.stats.Missing, FarmMissing{Sources: srcs})
		m = &f.stats.Missing[len(f.stats.Missing)-1]
	}
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	m.Assignments++
	m.Events += uint64(len(sorted))
	m.Fragments += uint64(len(sorted)) * uint64(len(j.missing))
	for _, id := range sorted {
		if k := len(m.IDs); k > 0 && m.IDs[k-1].Last()+1 == id && m.IDs[k-1].N < 1<<32-1 {
			m.IDs[k-1].N++
		} else if k < maxMissingIDs {
			m.IDs = append(m.IDs, farm.Range{First: id, N: 1})
		}
	}
}

// idRanges packs ascending ids into ranges.
func idRanges(ids []uint64) []builder.Range {
	var out []builder.Range
	for _, id := range ids {
		if n := len(out); n > 0 && out[n-1].Last()+1 == id && out[n-1].N < math.MaxUint32 {
			out[n-1].N++
			continue
		}
		out = append(out, builder.Range{First: id, N: 1})
	}
	return out
}

// assignmentDone is the builder reporting an assignment done: every
// event it built of it was delivered to the decide stage. Its decisions
// may already all be in.
func (f *farmNode) assignmentDone(r builder.AssignmentReport) {
	f.mu.Lock()
	fa := f.live[r.ID]
	var o farm.Outcome
	if fa != nil && fa.want < 0 {
		fa.want = r.Built
		if r.Reason != builder.DoneBuilt {
			f.log.Warn("farm: assignment done without all its events", "assignment", r.ID, "reason", r.Reason,
				"built", r.Built, "events", r.Events, "missing", r.Missing)
		}
		o = fa.step(f.policy)
	}
	f.mu.Unlock()
	if o != 0 {
		f.report(fa, o, fa.want)
	}
}

// step is how far fa got once its counts moved (0: no further), under
// f.mu: settled (OutcomeDurable) when every built event was decided and,
// with the durable policy, synced; decided when decided and waiting for
// the sync.
func (fa *farmAssign) step(policy farm.Outcome) farm.Outcome {
	switch {
	case fa.want < 0 || fa.decided < fa.want:
		return 0
	case policy != farm.OutcomeDurable || fa.durable >= fa.want:
		return farm.OutcomeDurable
	case fa.reported < farm.OutcomeDecided:
		return farm.OutcomeDecided
	}
	return 0
}

// decided is the decide stage telling the farm which events it decided.
func (f *farmNode) decided(ev *schemas.EventBatch) {
	f.events(ev.Len(), ev.EventID, func(fa *farmAssign) { fa.decided++ }, true)
}

// durable is the store telling the farm that the events of ids are synced
// (or were rejected: nothing to sync).
func (f *farmNode) durable(ids []uint64) {
	if f.policy != farm.OutcomeDurable {
		return
	}
	f.events(len(ids), func(i int) uint64 { return ids[i] }, func(fa *farmAssign) { fa.durable++ }, false)
}

// events applies count to the assignment of each of n event ids and
// reports the assignments that got further.
func (f *farmNode) events(n int, id func(int) uint64, count func(*farmAssign), unassigned bool) {
	type rep struct {
		fa *farmAssign
		o  farm.Outcome
	}
	var out []rep
	f.mu.Lock()
	for i := range n {
		fa := f.byEvent[id(i)]
		if fa == nil {
			if unassigned {
				f.stats.Unassigned++
			}
			continue
		}
		count(fa)
		if o := fa.step(f.policy); o != 0 {
			out = append(out, rep{fa, o})
		}
	}
	f.mu.Unlock()
	for _, r := range out {
		f.report(r.fa, r.o, r.fa.want)
	}
}

// report tells the agent how far an assignment got. OutcomeDurable here
// means settled: it is reported decided, then durable when the policy
// wants it, and the assignment is forgotten.
func (f *farmNode) report(fa *farmAssign, o farm.Outcome, events int) {
	ctx := context.WithoutCancel(f.n.farmCtx)
	f.mu.Lock()
	if fa.reported == farm.OutcomeDurable {
		f.mu.Unlock()
		return // settled already (two events' counts can reach it at once)
	}
	first := fa.reported < farm.OutcomeDecided
	if o > fa.reported {
		fa.reported = o
	}
	settled := o == farm.OutcomeDurable
	if settled {
		delete(f.live, fa.id)
		for _, id := range fa.ids {
			if f.byEvent[id] == fa {
				delete(f.byEvent, id)
			}
		}
		if f.policy == farm.OutcomeDurable {
			f.stats.Durable++
		}
	}
	if first {
		f.stats.Decided++
	}
	f.mu.Unlock()
	if first {
		_ = fa.ag.Outcome(ctx, fa.id, farm.OutcomeDecided, uint32(events))
	}
	if settled && f.policy == farm.OutcomeDurable {
		_ = fa.ag.Outcome(ctx, fa.id, farm.OutcomeDurable, uint32(events))
	}
}

// sweep gives up on assignments whose events were not all decided (or
// synced) within the wait: the builder discarded some of their fragments
// (counted there, e.g. late); they are reported with the events that were.
func (f *farmNode) sweep(now time.Time) {
	type late struct {
		fa            *farmAssign
		want, decided int
	}
	var old []late
	f.mu.Lock()
	for _, fa := range f.live {
		if now.Sub(fa.at) > f.wait {
			old = append(old, late{fa, fa.want, fa.decided})
		}
	}
	f.stats.GivenUp += uint64(len(old))
	f.mu.Unlock()
	for _, l := range old {
		f.log.Warn("farm: assignment not settled in time; reported with the events decided", "assignment", l.fa.id,
			"events", l.want, "decided", l.decided)
		f.report(l.fa, farm.OutcomeDurable, l.decided)
	}
}

// busy says what of the farm is still in flight on this node ("" when
// nothing is): the node finishes a stopped run only once it is idle, so
// this is what an operator reads when a stopped node does not exit.
func (f *farmNode) busy() string {
	st := f.agent.Load().Status()
	f.mu.Lock()
	live, jobs := len(f.live), len(f.jobs)
	f.mu.Unlock()
	var why []string
	if live > 0 || jobs > 0 {
		why = append(why, fmt.Sprintf("BU pipeline: %d assignments building or undecided, %d queued", live, jobs))
	}
	if st.RU != nil && (st.RU.Held > 0 || st.RU.Pending > 0 || st.RU.Sent > 0) {
		why = append(why, fmt.Sprintf("RU: %d packets held (%d bytes), %d assignments waiting for data, %d sent and not released",
			st.RU.Held, st.RU.HeldBytes, st.RU.Pending, st.RU.Sent))
	}
	if st.BU != nil && st.BU.InFlight > 0 {
		why = append(why, fmt.Sprintf("BU: %d assignments in flight", st.BU.InFlight))
	}
	if st.EM != nil && (st.EM.Queued > 0 || st.EM.Open > 0 || st.EM.Undecided > 0) {
		why = append(why, fmt.Sprintf("EM: %d elements announced and not assigned, %d assignments open, %d undecided",
			st.EM.Queued, st.EM.Open, st.EM.Undecided))
	}
	return strings.Join(why, "; ")
}

// ledger is the farm part of the node's ledger.
func (f *farmNode) ledger() *FarmLedger {
	f.mu.Lock()
	l := f.stats
	f.mu.Unlock()
	l.Agent = f.agent.Load().Status()
	return &l
}

// run starts the agent, the feeder and the watch of the farm's run state.
// done is closed once the operator stopped this run and nothing of it has
// been in flight on this node for a moment (the EM has published its last
// ledger by then), or when the agent ends by itself (fenced, refused: the
// run fails). wait stops the agent (it leaves the farm), after the node's
// pipeline drained, and closes the transport and the etcd client.
func (f *farmNode) run(ctx context.Context) (done <-chan struct{}, wait func()) {
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d := make(chan struct{})
	var once sync.Once
	finish := func() { once.Do(func() { close(d) }) }
	var wg sync.WaitGroup
	wg.Go(func() {
		defer finish()
		if f.roles&farm.RoleBU != 0 {
			// Restarted after a failover: void what an earlier incarnation
			// stored of work the EM gave to other BUs, before building any.
			f.voidStored(actx, f.agent.Load(), 0)
		}
		for {
			ag := f.agent.Load()
			err := ag.Run(actx)
			if err == nil || actx.Err() != nil {
				return
			}
			if !errors.Is(err, agent.ErrFenced) || f.roles&farm.RoleRU != 0 {
				// An RU's held packets end with its incarnation: the run
				// fails (an RU's failure is the farm's to handle).
				f.n.fail(fmt.Errorf("farm: %w", err))
				return
			}
			if err := f.rejoin(actx, ag, err); err != nil {
				f.n.fail(fmt.Errorf("farm: %w", err))
				return
			}
		}
	})
	wg.Go(func() { f.feed(actx) })
	wg.Go(func() {
		states, watchErr := f.ctl.WatchRunState(actx)
		var rewatch <-chan time.Time
		stopped := false
		var idleSince, stoppedAt, told time.Time
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-actx.Done():
				return
			case st, ok := <-states:
				if !ok {
					// The watch ended (etcd lost its leader, a compaction):
					// watch again, or the stop would never be seen.
					states = nil
					if err := <-watchErr; err != nil && actx.Err() == nil {
						f.log.Warn("farm: watching the run state; watching again", "err", err)
					}
					rewatch = time.After(200 * time.Millisecond)
					continue
				}
				f.seenRunState(st)
				if st.Run == f.n.cfg.Run && st.State == farmctl.StateStopped && !stopped {
					stopped = true
					f.log.Info("farm: run stopped; finishing what is in flight here")
				}
			case <-rewatch:
				rewatch = nil
				states, watchErr = f.ctl.WatchRunState(actx)
			case <-f.agent.Load().Drained():
				// Asked to drain (sluice farm drain): nothing of the farm
				// is left here and the peers were told; the node leaves.
				f.drained.Store(true)
				finish()
				return
			case now := <-tick.C:
				f.sweep(now)
				if !stopped {
					continue
				}
				if why := f.busy(); why != "" {
					idleSince = time.Time{}
					if stoppedAt.IsZero() {
						stoppedAt = now
					} else if now.Sub(stoppedAt) >= 5*time.Second && now.Sub(told) >= 5*time.Second {
						told = now
						f.log.Info("farm: run stopped; waiting for what is in flight here", "for", now.Sub(stoppedAt).Round(time.Second).String(), "waiting", why)
					}
					continue
				}
				if idleSince.IsZero() {
					idleSince = now
				}
				if now.Sub(idleSince) >= 600*time.Millisecond {
					finish()
					return
				}
			}
		}
	})
	return d, func() {
		cancel()
		wg.Wait()
		f.close()
	}
}

// rejoin brings a fenced BU back as a new incarnation: the EM declared
// the old one dead (it stopped answering: SIGSTOP, a stall) and gave its
// unreleased assignments to other BUs, so what the old one still builds
// is superseded — its releases are ignored by the EM (stale incarnation).
// rejoin lets the old incarnation's work in this node's pipeline settle
// (at most the wait), voids what it stored of the reassigned work, and
// makes the next incarnation's agent, which reports the voided events as
// duplicates once it joined.
func (f *farmNode) rejoin(ctx context.Context, old *agent.Agent, why error) error {
	inc := old.Incarnation()
	f.log.Warn("farm: fenced; letting this incarnation's work settle, voiding what was reassigned, rejoining",
		"incarnation", fmt.Sprintf("%x", inc), "why", why.Error())
	f.mu.Lock()
	f.stats.Fenced++
	f.mu.Unlock()
	deadline := time.Now().Add(f.wait)
	for time.Now().Before(deadline) {
		f.mu.Lock()
		n := len(f.live) + len(f.jobs)
		f.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(20 * time.Millisecond):
		}
	}
	next, err := agent.New(f.acfg)
	if err != nil {
		return err
	}
	f.voidStored(ctx, next, inc)
	f.agent.Store(next)
	return nil
}

// voidStored applies the EM's void records of this node (see
// farmctl.Client.Voids): the events its dead incarnations stored of
// assignments given to other BUs move to the store's void stream, so no
// export or replay processes them twice, and next reports them to the EM
// (duplicate_after_failover). wait, when not 0, is an incarnation just
// fenced: its record may still be on its way, so it is waited for (2 s at
// most: there is none when it held nothing unreleased). A record applied
// is deleted.
func (f *farmNode) voidStored(ctx context.Context, next *agent.Agent, wait uint64) {
	run := f.n.cfg.Run
	var recs []farm.VoidRecord
	for start := time.Now(); ; {
		var err error
		recs, err = f.ctl.Voids(ctx, run, f.n.cfg.Node.ID)
		if err != nil {
			f.log.Error("farm: void records", "err", err)
			return
		}
		if wait == 0 || slices.ContainsFunc(recs, func(v farm.VoidRecord) bool { return uint64(v.Incarnation) == wait }) ||
			time.Since(start) > 2*time.Second || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	store := f.n.parts.Store
	for _, v := range recs {
		var ranges []storage.IDRange
		for _, a := range v.Assigns {
			if a.Unit.Kind != farm.UnitEvents {
				continue
			}
			for _, r := range a.Unit.Ranges {
				ranges = append(ranges, storage.IDRange{Run: a.Unit.Run, First: r.First, N: uint64(r.N)})
			}
		}
		var voided storage.Voided
		if store != nil && len(ranges) > 0 {
			var err error
			if voided, err = store.Void(ranges); err != nil {
				f.log.Error("farm: voiding superseded events in the store", "incarnation", fmt.Sprintf("%x", v.Incarnation), "err", err)
				continue
			}
		}
		keys := append(voided.Accepted, voided.Deferred...)
		f.log.Warn("farm: voided the events a dead incarnation stored of assignments built elsewhere",
			"incarnation", fmt.Sprintf("%x", v.Incarnation), "assignments", len(v.Assigns),
			"accepted", len(voided.Accepted), "deferred", len(voided.Deferred))
		f.mu.Lock()
		f.stats.Voided += uint64(len(keys))
		f.mu.Unlock()
		for _, u := range voidedUnits(keys) {
			next.Duplicate(farm.Duplicate{Dead: uint64(v.Incarnation), BU: f.n.cfg.Node.ID, Unit: u})
		}
		if err := f.ctl.DeleteVoid(ctx, run, f.n.cfg.Node.ID, uint64(v.Incarnation)); err != nil {
			f.log.Warn("farm: delete void record", "err", err)
		}
	}
}

// voidedUnits groups voided store keys into units of event ids, one per
// run, ranges ascending.
func voidedUnits(keys []storage.Key) []farm.Unit {
	slices.SortFunc(keys, func(x, y storage.Key) int {
		if x.Run != y.Run {
			return cmp.Compare(x.Run, y.Run)
		}
		return cmp.Compare(x.EventID, y.EventID)
	})
	var out []farm.Unit
	for i, k := range keys {
		if i > 0 && keys[i-1] == k {
			continue
		}
		if n := len(out); n == 0 || out[n-1].Run != k.Run {
			out = append(out, farm.Unit{Run: k.Run, Kind: farm.UnitEvents})
		}
		u := &out[len(out)-1]
		if n := len(u.Ranges); n > 0 && u.Ranges[n-1].Last()+1 == k.EventID && u.Ranges[n-1].N < math.MaxUint32 {
			u.Ranges[n-1].N++
			continue
		}
		u.Ranges = append(u.Ranges, farm.Range{First: k.EventID, N: 1})
	}
	return out
}

// endOfData tells the farm this node's readout ended.
func (f *farmNode) endOfData(ctx context.Context) {
	if err := f.agent.Load().EndOfData(ctx); err != nil {
		f.log.Warn("farm: end of data", "err", err)
	}
}
