// Package agent is one node's part of the farm at run time: it joins the
// farm in etcd, campaigns for event manager if it is a candidate, keeps a
// peer connection to every other member, and drives the pure state
// machines of package farm — the EM when it leads, the RU tracker over the
// packets its readout hands it, the BU tracker feeding its local build
// pipeline — with the messages those connections carry.
//
// Everything the state machines do happens on one goroutine (the loop):
// connection readers, etcd watches, the readout and the pipeline post
// closures to it, so the machines stay single-threaded as they are
// written. Sends go through one goroutine per peer so a slow peer never
// blocks the loop.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/sluice-daq/sluice/node/farm"
	"github.com/sluice-daq/sluice/node/farm/control"
	"github.com/sluice-daq/sluice/node/peer"
	"github.com/sluice-daq/sluice/schemas"
)

// leaveTimeout bounds the lease revoke of a node leaving the farm.
const leaveTimeout = 3 * time.Second

// Sentinel errors.
var (
	// ErrFenced: this node's membership lease was revoked (the EM declared
	// it dead) or expired; its incarnation is over (it must start again as
	// a new one). Run's error wraps it, saying which (fenced).
	ErrFenced = errors.New("agent: fenced")
	// ErrRefused: this node's run configuration differs from the farm's.
	ErrRefused = errors.New("agent: refused to join the run")
	// ErrEnded: the agent's Run has returned; it takes nothing more.
	ErrEnded = errors.New("agent: ended")
)

// Pipeline is a BU's local build pipeline (the builder, trigger chain and
// store of a single node). Build is called on the agent's loop, so it must
// return quickly: it hands over one assignment whose data is all in (or
// given up on: missing names the RUs that did not send it all), as the
// multi-fragment packets the RUs sent, views into receive buffers that
// stay valid until release is called (once). missing lists the sources
// without data (their fragments are absent from its events). The pipeline
// reports its progress on each assignment with Agent.Outcome.
type Pipeline interface {
	Build(a farm.Assign, packets []schemas.MFP, missing []uint32, release func())
}

// Config configures an agent.
type Config struct {
	Node    string
	Roles   farm.Roles
	Sources []uint32 // RU: the sources its readout delivers
	// TriggerSource: the RU that reads this source names the events
	// (announces them to the EM) from its packets.
	TriggerSource uint32
	// Run is this node's view of the run: it refuses to join a farm whose
	// record differs.
	Run       farm.RunConfig
	Control   *control.Client
	Transport peer.Transport
	// HTTP is the node's HTTP endpoint (host:port serving /metrics and
	// /status), registered with the membership for Prometheus's service
	// discovery (`sluice farm sd`); "" when the node serves none.
	HTTP string
	// Token is the farm's shared token, for the bye a drained node sends
	// its peers as it leaves ("": no bye message, the lease's end says it).
	Token string
	// LeaseTTL is the membership lease (default 5s; etcd may grant more).
	LeaseTTL time.Duration
	// Slots and SlotBytes: the BU's capacity (defaults 64 × assignment
	// size, 256 MiB).
	Slots     int
	SlotBytes int64
	// Wait: how long RUs and BUs wait for an assignment's missing data
	// (default 1s).
	Wait time.Duration
	// BehindWait and BehindLimit: past Wait an RU waits on for a source
	// of its own that is behind the assignment and sent a packet within
	// BehindWait, up to BehindLimit after the assignment (see
	// farm.RUConfig). BehindWait 0: 5s, as builder.behind_wait; negative,
	// or BehindLimit 0: the RU waits Wait only. A BU waits for a live
	// RU's final data up to max(Wait, BehindLimit) + Wait
	// (farm.BUConfig.FinalWait).
	BehindWait, BehindLimit time.Duration
	// Tick is the state machines' timer (default 5ms).
	Tick time.Duration
	// BlockSize: assignment ids the EM reserves at a time (default 4096).
	BlockSize uint64
	// Linger: a partly filled assignment waits this long (default 2ms).
	Linger time.Duration
	// SendPool bounds the RU's send buffers (default 64 MiB).
	SendPool int
	// ReconcileWait bounds an EM takeover: members that have not said
	// what they hold by then are given up on (default 5s).
	ReconcileWait time.Duration
	Pipeline      Pipeline
	// Log is the agent's logger; it names nothing itself, so give it one
	// that names the node (and run).
	Log *slog.Logger
}

func (c *Config) defaults() error {
	if c.Node == "" || c.Control == nil || c.Transport == nil {
		return fmt.Errorf("agent: Node, Control and Transport are required")
	}
	if err := c.Run.Validate(); err != nil {
		return err
	}
	if c.Roles&farm.RoleBU != 0 && c.Pipeline == nil {
		return fmt.Errorf("agent: a BU needs a Pipeline")
	}
	if c.Roles&farm.RoleRU != 0 && len(c.Sources) == 0 {
		return fmt.Errorf("agent: an RU needs its Sources")
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 5 * time.Second
	}
	if c.Slots == 0 {
		c.Slots = 64 * c.Run.AssignmentSize
	}
	if c.SlotBytes == 0 {
		c.SlotBytes = 256 << 20
	}
	if c.Wait == 0 {
		c.Wait = time.Second
	}
	if c.BehindWait == 0 {
		c.BehindWait = 5 * time.Second
	}
	if c.Tick == 0 {
		c.Tick = 5 * time.Millisecond
	}
	if c.BlockSize == 0 {
		c.BlockSize = 4096
	}
	if c.Linger == 0 {
		c.Linger = 2 * time.Millisecond
	}
	if c.SendPool == 0 {
		c.SendPool = 64 << 20
	}
	if c.ReconcileWait == 0 {
		c.ReconcileWait = 5 * time.Second
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// member is what the agent knows of another (or its own) membership.
type member struct {
	control.Member
	roles farm.Roles
}

// Agent is one node's farm runtime.
type Agent struct {
	cfg   Config
	ctx   context.Context // Run's
	log   *slog.Logger
	loop  chan func()
	clock farm.SystemClock

	ms     *control.Membership
	inc    uint64
	unit   farm.UnitKind
	policy farm.Outcome
	proto  farm.Protocol

	// Loop state.
	members map[string]*member
	peers   map[string]*peerConn
	leader  control.Leader
	hasLead bool
	em      *farm.EM
	lead    *control.Leadership
	// pendingLead: elected, waiting until the RUs it knows cover the run's
	// sources; prevLedger the run's ledger it found published (inherit).
	pendingLead *control.Leadership
	prevLedger  farm.LedgerSummary
	inherit     bool
	ru          *farm.RU
	bu          *farm.BU
	seq         map[uint32]uint64    // UnitPackets: next sequence number per source
	data        map[uint64]*received // BU: what arrived per assignment
	sources     []uint32             // every source of the run
	early       []farm.Announce      // announcements before an EM is known
	early2      []func()             // messages for the EM before this node became it
	pool        *sendPool
	stopped     bool
	// refusedAt, refusedSeen: when refused peer connections were last
	// logged, and the counts then (logRefused).
	refusedAt   time.Time
	refusedSeen map[string]uint64
	// opStopped: the operator stopped the run (members leave as they
	// finish: a peer gone then is no fault).
	opStopped bool
	// endMsg is this node's End (it holds the trigger source and names no
	// more): sent to every RU, and to each that joins later.
	endMsg []byte
	// emEnded: this node, as EM, sent the End of the run on behalf of
	// the trigger source's RU, gone before it could.
	emEnded bool
	// byeAt: when this draining node said bye (it leaves once sent).
	byeAt time.Time
	// dups are duplicate reports for the EM, sent once one leads.
	dups []farm.Duplicate
	// done is closed when Run returns: posts fail from then on.
	done     chan struct{}
	doneOnce sync.Once

	// Membership and run control (members.go): the sources of every RU
	// seen this run, run control's mask, the standing drain requests, and
	// this node's drain.
	seen     map[string][]uint32
	mask     control.RunMask
	masked   map[uint32]bool
	drains   map[string]uint64
	draining bool
	drained  chan struct{}
	byes     map[string]uint64 // peers that said bye, by incarnation
	ended    map[uint64]bool   // incarnations whose membership ended (memberGone)
	// A draining EM candidate hands over (drain.go): stopCampaign ends its
	// campaign, resigned says it will not lead again, handedOver that its
	// last ledger is published and its leadership resigned.
	stopCampaign context.CancelFunc
	resigned     bool
	handedOver   bool
	noSuccessor  bool // logged once: no other EM candidate to hand over to

	mu     sync.Mutex
	status Status
}

// Status is a snapshot for /status and tests.
type Status struct {
	Node        string           `json:"node"`
	Incarnation farm.Incarnation `json:"incarnation"`
	Roles       string           `json:"roles"`
	EM          *farm.EMStats    `json:"em,omitempty"`
	RU          *farm.RUStats    `json:"ru,omitempty"`
	BU          *farm.BUStats    `json:"bu,omitempty"`
	Peers       []string         `json:"peers"`
	// Members are the other members this node knows, with their link.
	Members []PeerStatus `json:"members"`
	// SendPool is the RU's send buffers (bytes in use, their peak, the
	// bound: Config.SendPool).
	SendPool PoolStatus          `json:"send_pool"`
	Leader   string              `json:"leader"`
	Epoch    uint64              `json:"epoch"`
	Ledger   *farm.LedgerSummary `json:"ledger,omitempty"`
	Dropped  map[string]uint64   `json:"dropped,omitempty"` // messages dropped, by why
	// PeersRefused counts peer connections (either way) whose hello
	// failed, by reason (token, farm, ...): the transport's.
	PeersRefused map[string]uint64 `json:"peers_refused,omitempty"`
}

// PeerStatus is one other member as this node sees it.
type PeerStatus struct {
	Node        string           `json:"node"`
	Incarnation farm.Incarnation `json:"incarnation"`
	Roles       string           `json:"roles"`
	Address     string           `json:"address"` // peer transport
	HTTP        string           `json:"http,omitempty"`
	Connected   bool             `json:"connected"` // the peer link is up
}

// PoolStatus is a bounded pool of bytes.
type PoolStatus struct {
	UsedBytes  int64 `json:"used_bytes"`
	PeakBytes  int64 `json:"peak_bytes"`
	LimitBytes int64 `json:"limit_bytes"`
}

// New checks cfg and returns an agent; Run starts it.
func New(cfg Config) (*Agent, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, log: cfg.Log, loop: make(chan func(), 1024),
		members: map[string]*member{}, peers: map[string]*peerConn{}, seq: map[uint32]uint64{},
		data: map[uint64]*received{}, seen: map[string][]uint32{}, masked: map[uint32]bool{},
		drains: map[string]uint64{}, drained: make(chan struct{}), byes: map[string]uint64{}, ended: map[uint64]bool{}, done: make(chan struct{})}
	for _, g := range cfg.Run.Sources {
		ids, _ := schemas.ParseSourceList(g.Sources) // Validate checked them
		a.sources = append(a.sources, ids...)
	}
	a.proto, _ = farm.ParseProtocol(cfg.Run.Protocol)
	a.policy, _ = farm.ParseOutcome(cfg.Run.Release)
	if cfg.Run.Unit == farm.UnitPackets.String() {
		a.unit = farm.UnitPackets
	} else {
		a.unit = farm.UnitEvents
	}
	a.status.Dropped = map[string]uint64{}
	return a, nil
}

// post runs fn on the loop (blocking while the loop's queue is full: the
// backpressure of readout and connections). Once Run returned it fails
// with ErrEnded.
func (a *Agent) post(ctx context.Context, fn func()) error {
	select {
	case a.loop <- fn:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-a.done:
		return ErrEnded
	}
}

// Incarnation is this agent's membership lease id (0 before it joined).
func (a *Agent) Incarnation() uint64 { return uint64(a.Status().Incarnation) }

// Run joins the farm and runs until ctx ends (nil) or the node is fenced
// (ErrFenced) or refused (ErrRefused). An agent runs once: a node fenced
// comes back as a new incarnation with a new Agent.
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer a.end()
	a.ctx = ctx
	c := a.cfg.Control
	if err := c.CheckRun(ctx, a.cfg.Run); err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	ms, err := c.Join(ctx, control.Member{Node: a.cfg.Node, Roles: a.cfg.Roles.String(),
		Sources: schemas.FormatSourceList(a.cfg.Sources), Address: a.cfg.Transport.Addr(), HTTP: a.cfg.HTTP}, a.cfg.LeaseTTL)
	if err != nil {
		return err
	}
	a.ms, a.inc = ms, ms.Incarnation()
	for i := range a.dups {
		a.dups[i].Incarnation = a.inc
	}
	a.log.Info("farm: joined", "incarnation", fmt.Sprintf("%x", a.inc), "roles", a.cfg.Roles.String())
	defer func() {
		// Bounded: etcd's client retries an unanswered revoke for ever,
		// and a node must still exit when etcd is slow or gone (its lease
		// then expires by itself). Seen as a node that said stopped and
		// never exited while etcd did not answer.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveTimeout)
		defer cancel()
		if err := ms.Leave(lctx); err != nil {
			a.log.Warn("farm: leaving", "err", err)
		}
	}()
	if err := a.startRoles(); err != nil {
		return err
	}
	a.pool = newSendPool(a.cfg.Transport, a.cfg.SendPool)
	defer a.pool.close()

	members, rev, err := c.Members(ctx)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(3)
	go func() { defer wg.Done(); a.acceptLoop(ctx) }()
	go func() {
		defer wg.Done()
		for e := range c.WatchMembers(ctx, rev) {
			e := e
			if a.post(ctx, func() { a.memberEvent(ctx, e) }) != nil {
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for e := range c.WatchLeader(ctx) {
			e := e
			if a.post(ctx, func() { a.leaderEvent(ctx, e) }) != nil {
				return
			}
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		states, errc := c.WatchRunState(ctx)
		for st := range states {
			if a.post(ctx, func() { a.runState(ctx, st) }) != nil {
				return
			}
		}
		if err := <-errc; err != nil && ctx.Err() == nil {
			a.log.Warn("farm: run state watch", "err", err)
		}
	}()
	a.watchRunControl(ctx, &wg)
	if a.cfg.Roles&farm.RoleEM != 0 {
		cctx, stop := context.WithCancel(ctx)
		a.stopCampaign = stop
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Campaign(cctx, ms)
			if err != nil {
				return
			}
			// The run's ledger so far (an earlier EM's, if any): read once
			// leading, when no earlier EM can publish any more.
			prev, ok, err := c.Ledger(ctx, a.cfg.Run.Run)
			if err != nil {
				a.log.Warn("farm: the run's ledger so far; this EM's starts empty", "err", err)
			}
			a.post(ctx, func() { a.becomeEM(ctx, l, prev, ok && err == nil) })
		}()
	}
	for _, m := range members {
		a.memberEvent(ctx, control.MemberEvent{Member: m})
	}
	tick := time.NewTicker(a.cfg.Tick)
	defer tick.Stop()
	publish := time.NewTicker(200 * time.Millisecond)
	defer publish.Stop()
	for {
		select {
		case <-ctx.Done():
			a.closePeers()
			return nil
		case <-ms.Done():
			a.closePeers()
			return a.fenced(ctx)
		case fn := <-a.loop:
			fn()
		case <-tick.C:
			a.tick()
		case <-publish.C:
			a.publish(ctx)
		}
		a.route(ctx)
		a.snapshot()
	}
}

func (a *Agent) startRoles() error {
	if a.cfg.Roles&farm.RoleRU != 0 {
		ru, err := farm.NewRU(farm.RUConfig{Sources: a.cfg.Sources, Release: a.policy, Wait: a.cfg.Wait,
			BehindWait: a.cfg.BehindWait, BehindLimit: a.cfg.BehindLimit,
			Names: slices.Contains(a.cfg.Sources, a.cfg.TriggerSource), TriggerSource: a.cfg.TriggerSource}, a.clock)
		if err != nil {
			return err
		}
		a.ru = ru
	}
	if a.cfg.Roles&farm.RoleBU != 0 {
		bu, err := farm.NewBU(farm.BUConfig{Node: a.cfg.Node, Protocol: a.proto, Release: a.policy,
			ReleaseGroup: a.cfg.Run.ReleaseGroup, ReleaseLinger: 2 * a.cfg.Tick, Slots: a.cfg.Slots,
			SlotBytes: a.cfg.SlotBytes, Wait: a.cfg.Wait, FinalWait: a.finalWait(), Sources: a.sources,
			MaxRequests: a.cfg.Run.MaxRequests}, a.inc, a.clock)
		if err != nil {
			return err
		}
		a.bu = bu
	}
	return nil
}

// finalWait is how long a BU waits for a live RU's final data: longer
// than the RU waits (Wait, or BehindLimit for a source behind), with a
// Wait's margin for the announcement and the transfer (see
// farm.BUConfig.FinalWait).
func (a *Agent) finalWait() time.Duration {
	if a.cfg.BehindWait <= 0 || a.cfg.BehindLimit <= 0 {
		return 2 * a.cfg.Wait
	}
	return max(a.cfg.Wait, a.cfg.BehindLimit) + a.cfg.Wait
}

// endForGoneTrigger: the run is stopped and the RU holding the trigger
// source is gone (killed, or it left before this EM led): it will name
// nothing more, and the RUs that had not got its End would hold what no
// assignment can take for ever. The EM ends the space for it with what it
// announced (the ledger's, inherited across takeovers); an RU that had
// the RU's own End ignores this one.
func (a *Agent) endForGoneTrigger() {
	if a.em == nil || !a.stopped || a.emEnded || a.endMsg != nil {
		return
	}
	if a.ru != nil && slices.Contains(a.cfg.Sources, a.cfg.TriggerSource) {
		return // this node's RU ends it itself
	}
	for n := range a.members {
		if slices.Contains(a.seen[n], a.cfg.TriggerSource) {
			return // alive: it ends the space when its readout ends
		}
	}
	key := farm.UnitKey{Run: a.cfg.Run.Run, Kind: a.unit}
	e := farm.End{Key: key, Named: a.em.Ledger().Announced(key)}
	body, err := farm.AppendEnd(nil, e)
	if err != nil {
		a.log.Error("farm: encode end", "err", err)
		return
	}
	a.emEnded = true
	a.log.Info("farm: the trigger source's RU is gone; ending the run's naming for it with what was announced", "named_spans", len(e.Named))
	for _, n := range a.rus() {
		a.send(n, uint16(farm.KindEnd), body)
	}
}

func (a *Agent) tick() {
	a.logRefused(a.clock.Now())
	a.endForGoneTrigger()
	if a.em != nil {
		a.em.Tick()
	}
	if a.ru != nil {
		a.ru.Tick()
	}
	if a.bu != nil {
		a.bu.Tick()
	}
	a.checkDrained()
	a.checkQueued(time.Now())
}

// queuedWarnAfter is how long messages may wait for a peer that is not
// connected before the agent says so (and again as often while they do).
const queuedWarnAfter = 5 * time.Second

// checkQueued logs the links whose messages have waited long for a
// connection: a data message pins the RU's packets, and its readout ring
// fills behind them, so such a wait must not be silent.
func (a *Agent) checkQueued(now time.Time) {
	for node, p := range a.peers {
		n, connected := p.queued()
		if n == 0 || connected {
			p.waitSince, p.warned = time.Time{}, time.Time{}
			continue
		}
		if p.waitSince.IsZero() {
			p.waitSince = now
		}
		if now.Sub(p.waitSince) >= queuedWarnAfter && now.Sub(p.warned) >= queuedWarnAfter {
			p.warned = now
			_, member := a.members[node]
			a.log.Warn("farm: messages wait for a peer that is not connected", "peer", node, "messages", n,
				"for", now.Sub(p.waitSince).Round(time.Second).String(), "member", member)
		}
	}
}

// fenced says how this incarnation's membership ended (ErrFenced wrapped):
// revoked by the EM that declared it dead (its Fencing record), or its
// lease expired (keep-alives did not reach etcd within the TTL).
func (a *Agent) fenced(ctx context.Context) error {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	f, ok, err := a.cfg.Control.Fenced(fctx, a.inc)
	switch {
	case err != nil:
		return fmt.Errorf("%w: membership lease %x ended (revoked or expired: etcd cannot say: %v)", ErrFenced, a.inc, err)
	case ok:
		return fmt.Errorf("%w: the event manager %s revoked membership %x at %s (%s)", ErrFenced, f.By, a.inc,
			f.At.Format("15:04:05.000"), f.Reason)
	default:
		return fmt.Errorf("%w: membership lease %x expired: its keep-alives did not reach etcd within lease_ttl %s",
			ErrFenced, a.inc, a.cfg.LeaseTTL)
	}
}

// memberEvent: a member joined or left.
func (a *Agent) memberEvent(ctx context.Context, e control.MemberEvent) {
	if e.Err != nil {
		a.log.Warn("farm: membership watch", "err", e.Err)
		return
	}
	m := e.Member
	if e.Left {
		old := a.members[m.Node]
		if old == nil || old.Incarnation != m.Incarnation {
			return
		}
		delete(a.members, m.Node)
		a.log.Info("farm: member left", "peer", m.Node, "incarnation", fmt.Sprintf("%x", m.Incarnation))
		a.memberGone(old)
		if p := a.peers[m.Node]; p != nil && p.inc == uint64(m.Incarnation) {
			p.close()
			delete(a.peers, m.Node)
		}
		return
	}
	roles := parseRoles(m.Roles)
	if old := a.members[m.Node]; old != nil {
		if old.Incarnation == m.Incarnation {
			return
		}
		a.memberGone(old)
	}
	nm := &member{Member: m, roles: roles}
	a.members[m.Node] = nm
	if roles&farm.RoleBU != 0 && a.em != nil {
		a.em.Join(m.Node, uint64(m.Incarnation))
	}
	if roles&farm.RoleRU != 0 {
		srcs, err := schemas.ParseSourceList(m.Sources)
		if err != nil {
			a.log.Warn("farm: member's source list", "peer", m.Node, "err", err)
		}
		a.seen[m.Node] = srcs
		if a.bu != nil {
			a.bu.RUJoin(m.Node, srcs)
		}
		if slices.Contains(a.mask.Nodes, m.Node) {
			a.applyMask() // a masked node's sources, learnt now
		}
	}
	if roles&farm.RoleBU != 0 && a.em != nil && a.drains[m.Node] == uint64(m.Incarnation) {
		a.em.Drain(m.Node, uint64(m.Incarnation))
	}
	if m.Node != a.cfg.Node {
		a.connect(ctx, nm)
		if roles&farm.RoleRU != 0 && a.endMsg != nil {
			a.send(m.Node, uint16(farm.KindEnd), a.endMsg)
		}
	}
	a.tryLead(ctx)
}

// memberGone: an incarnation ended (left, fenced, expired, or replaced).
// What is queued for it goes: a link made before its record arrived (or
// again after it was lost) is not bound to it, and its queued data would
// pin the RU's packets — and the readout ring behind them — for ever.
func (a *Agent) memberGone(m *member) {
	inc := uint64(m.Incarnation)
	a.ended[inc] = true
	if p := a.peers[m.Node]; p != nil && p.inc != inc {
		if n := p.dropFor(inc); n > 0 {
			a.log.Info("farm: dropped messages queued for an incarnation that ended", "peer", m.Node,
				"incarnation", fmt.Sprintf("%x", inc), "messages", n)
		}
	}
	if m.roles&farm.RoleBU != 0 && a.em != nil {
		a.em.Dead(m.Node, uint64(m.Incarnation))
	}
	if a.em != nil {
		a.em.PartyGone(m.Node)
	}
	if m.roles&farm.RoleRU != 0 && a.bu != nil && m.Node != a.cfg.Node {
		a.bu.RUDead(m.Node)
	}
}

func parseRoles(s string) farm.Roles {
	var r farm.Roles
	for _, x := range []struct {
		n string
		r farm.Roles
	}{{"ru", farm.RoleRU}, {"bu", farm.RoleBU}, {"em", farm.RoleEM}} {
		for _, part := range splitComma(s) {
			if part == x.n {
				r |= x.r
			}
		}
	}
	return r
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

// leaderEvent: the EM changed.
func (a *Agent) leaderEvent(ctx context.Context, e control.LeaderEvent) {
	if e.Err != nil {
		a.log.Warn("farm: leader watch", "err", e.Err)
		return
	}
	newEpoch := e.OK && (!a.hasLead || e.Leader.Epoch > a.leader.Epoch)
	a.leader, a.hasLead = e.Leader, e.OK
	if !e.OK {
		return
	}
	a.log.Info("farm: event manager", "leader", e.Leader.Node, "epoch", e.Leader.Epoch)
	if newEpoch {
		a.report(ctx, e.Leader.Epoch)
	}
	a.sendDuplicates()
	for _, an := range a.early {
		a.toEM(ctx, an)
	}
	a.early = nil
}

// report tells the EM of a new epoch what this node holds (see
// farm.EM.Reconcile): the BU its credit and inventory; the RU holding the
// trigger source first announces again what it holds unreleased; every RU
// its recent releases. A node with both roles sends one inventory.
func (a *Agent) report(ctx context.Context, epoch uint64) {
	inv := farm.Inventory{Epoch: epoch, Incarnation: a.inc, Node: a.cfg.Node}
	if a.bu != nil {
		a.bu.Lead(epoch)
		inv.Entries = append(inv.Entries, a.bu.Inventory(epoch).Entries...)
	}
	if a.ru != nil {
		if slices.Contains(a.cfg.Sources, a.cfg.TriggerSource) {
			for _, u := range a.ru.Unassigned(a.cfg.TriggerSource) {
				a.toEM(ctx, farm.Announce{Unit: u})
			}
		}
		for _, e := range a.ru.Inventory(epoch, a.cfg.Node, a.inc).Entries {
			if a.bu != nil && e.BU == a.cfg.Node && e.Reached == 0 {
				continue // this node's BU says what it holds (the EM would take it for the BU's)
			}
			inv.Entries = append(inv.Entries, e)
		}
	}
	if a.bu == nil && a.ru == nil {
		return // an EM-only node is no party of a takeover
	}
	body, err := farm.AppendInventory(nil, inv)
	if err != nil {
		a.log.Error("farm: encode inventory", "err", err)
		return
	}
	a.toEMBody(uint16(farm.KindInventory), body)
}

// becomeEM: this node won the election. It starts assigning once every
// source of the run is read out by an RU it knows: its announcements of
// assignments (push) and its relays of releases go to the RUs it knows,
// so one it did not know yet would miss them.
func (a *Agent) becomeEM(ctx context.Context, l *control.Leadership, prev farm.LedgerSummary, inherit bool) {
	if a.resigned {
		// Elected while draining: hand over at once (nothing to publish).
		a.resign(ctx, l, nil)
		return
	}
	a.pendingLead = l
	a.prevLedger, a.inherit = prev, inherit
	a.tryLead(ctx)
}

// covered reports whether the RUs this node knows read out every source
// of the run.
func (a *Agent) covered() bool {
	if a.stopped {
		// The run is stopping: RUs that finished and left (a folded
		// node, the old EM among them, leaves once nothing is in flight
		// there) send nothing more. Waiting for their sources would leave
		// the rest of the farm without an EM, holding its packets for ever
		// (seen in make farm when the EM's node ended first).
		return true
	}
	have := map[uint32]bool{}
	for _, m := range a.members {
		if m.roles&farm.RoleRU == 0 {
			continue
		}
		ids, _ := schemas.ParseSourceList(m.Sources)
		for _, id := range ids {
			have[id] = true
		}
	}
	for _, s := range a.sources {
		if !have[s] && !a.masked[s] {
			return false
		}
	}
	return true
}

func (a *Agent) tryLead(ctx context.Context) {
	l := a.pendingLead
	if l == nil || !a.covered() {
		return
	}
	a.pendingLead = nil
	cfg, err := a.cfg.Run.EMConfig(a.cfg.BlockSize, a.cfg.Linger)
	if err != nil {
		a.log.Error("farm: cannot be the event manager", "err", err)
		return
	}
	cfg.ReconcileWait = a.cfg.ReconcileWait
	em, err := farm.NewEM(cfg, l.Epoch(), a.clock)
	if err != nil {
		a.log.Error("farm: cannot be the event manager", "err", err)
		return
	}
	if a.inherit {
		// The farm ledger spans the run: go on from the last one published.
		if err := em.Ledger().Inherit(a.prevLedger); err != nil {
			a.log.Error("farm: the run's ledger so far cannot be inherited; this EM's starts empty", "err", err)
		} else {
			a.log.Info("farm: inherited the run's ledger", "announced", a.prevLedger.Announced, "built", a.prevLedger.Built)
		}
		a.prevLedger, a.inherit = farm.LedgerSummary{}, false
	}
	a.em, a.lead = em, l
	a.log.Info("farm: leading", "epoch", l.Epoch())
	names := make([]string, 0, len(a.members))
	for n := range a.members {
		names = append(names, n)
	}
	sort.Strings(names)
	var parties []string
	for _, n := range names {
		m := a.members[n]
		if m.roles&farm.RoleBU != 0 {
			em.Join(m.Node, uint64(m.Incarnation))
			if a.drains[m.Node] == uint64(m.Incarnation) {
				em.Drain(m.Node, uint64(m.Incarnation))
			}
		}
		if m.roles&(farm.RoleBU|farm.RoleRU) != 0 {
			parties = append(parties, m.Node)
		}
	}
	// Take over from whatever an earlier EM left: assign nothing until
	// every BU and RU said what it holds.
	em.Reconcile(parties)
	if a.stopped {
		em.Flush()
	}
	for _, fn := range a.early2 {
		fn()
	}
	a.early2 = nil
}

// runState follows the farm's desired run state: when the operator stops
// this run (`sluice farm stop`), no more data will join partly filled
// assignments (as EndOfData).
func (a *Agent) runState(ctx context.Context, st control.RunState) {
	if st.Run != a.cfg.Run.Run || st.State != control.StateStopped || a.stopped {
		return
	}
	a.log.Info("farm: run stopped by the operator", "by", st.By)
	a.stopped, a.opStopped = true, true
	// Elected and waiting for sources no member reads: once stopped it
	// leads without them (see covered), or nothing held here would ever
	// be built and the stop would never end.
	a.tryLead(ctx)
	if a.em != nil {
		a.em.Flush()
	}
	a.endNaming() // the trigger stopped
}

// endNaming: when this node's RU holds the trigger source, it names no
// more elements of the run (its readout ended, or the run was stopped)
// and tells every RU, itself included, which it named (farm.End): they
// free what no assignment can hold.
func (a *Agent) endNaming() {
	if a.ru == nil || a.endMsg != nil || !slices.Contains(a.cfg.Sources, a.cfg.TriggerSource) {
		return
	}
	e := a.ru.EndOf(farm.UnitKey{Run: a.cfg.Run.Run, Kind: a.unit})
	body, err := farm.AppendEnd(nil, e)
	if err != nil {
		a.log.Error("farm: encode end", "err", err)
		return
	}
	a.endMsg = body
	a.log.Info("farm: the trigger source names no more events of the run; telling the RUs", "named_spans", len(e.Named))
	rus := a.rus()
	if !slices.Contains(rus, a.cfg.Node) {
		rus = append(rus, a.cfg.Node)
	}
	for _, n := range rus {
		a.send(n, uint16(farm.KindEnd), body)
	}
}

// Outcome is the BU's pipeline reporting how far assignment id got
// (events built, for decided and durable). Safe from any goroutine.
func (a *Agent) Outcome(ctx context.Context, id uint64, o farm.Outcome, events uint32) error {
	return a.post(ctx, func() {
		if a.bu != nil {
			a.bu.Outcome(id, o, events)
		}
	})
}

// Unbuilt tells the BU which ids of assignment id no RU's data came for
// (see farm.BU.Unbuilt); call it before the decided Outcome.
func (a *Agent) Unbuilt(ctx context.Context, id uint64, rs []farm.Range) error {
	return a.post(ctx, func() {
		if a.bu != nil {
			a.bu.Unbuilt(id, rs)
		}
	})
}

// EndOfData tells the farm that this node's readout has ended: the EM (if
// this node leads) sends partly filled assignments at once from now on.
// Call it on every node; the EM acts on its own.
func (a *Agent) EndOfData(ctx context.Context) error {
	return a.post(ctx, func() {
		a.stopped = true
		if a.em != nil {
			a.em.Flush()
		}
		if a.ru != nil {
			a.ru.ReadoutEnded()
		}
		a.endNaming()
	})
}

// Duplicate queues, before Run, a report of events an earlier incarnation
// of this BU had stored for assignments the EM reassigned (see
// farm.Duplicate; Run fills in its Incarnation): sent to the EM once one
// leads.
func (a *Agent) Duplicate(d farm.Duplicate) { a.dups = append(a.dups, d) }

func (a *Agent) sendDuplicates() {
	if !a.hasLead || a.inc == 0 {
		return
	}
	for _, d := range a.dups {
		body, err := farm.AppendDuplicate(nil, d)
		if err != nil {
			a.log.Error("farm: encode duplicate", "err", err)
			continue
		}
		a.toEMBody(uint16(farm.KindDuplicate), body)
	}
	a.dups = nil
}

// end closes done and gives back the data of assignments never built.
func (a *Agent) end() {
	a.doneOnce.Do(func() { close(a.done) })
	for id, r := range a.data {
		for _, b := range r.bufs {
			b.Release()
		}
		delete(a.data, id)
	}
}

// Status returns the latest snapshot (safe from any goroutine).
func (a *Agent) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.status
	s.Peers = append([]string(nil), a.status.Peers...) // snapshot reuses its slice
	s.Dropped = make(map[string]uint64, len(a.status.Dropped))
	for k, v := range a.status.Dropped {
		s.Dropped[k] = v
	}
	if a.cfg.Transport != nil {
		s.PeersRefused = a.cfg.Transport.Stats().Refused
	}
	return s
}

// refusedEvery is how often at most refused peer connections are logged.
const refusedEvery = 10 * time.Second

// logRefused logs, at most every refusedEvery, the peer connections the
// transport refused since the last time (a node of another farm, or one
// whose token differs: on both sides, as neither builds with the other).
func (a *Agent) logRefused(now time.Time) {
	if a.cfg.Transport == nil || now.Sub(a.refusedAt) < refusedEvery {
		return
	}
	cur := a.cfg.Transport.Stats().Refused
	var total, prev uint64
	for _, n := range cur {
		total += n
	}
	for _, n := range a.refusedSeen {
		prev += n
	}
	if total == prev {
		return
	}
	a.refusedAt, a.refusedSeen = now, cur
	a.log.Warn("farm: peer connections refused (another farm, or a token that differs: the peers cannot build together)",
		"since_last", total-prev, "by_reason", cur)
}

func (a *Agent) drop(why string) {
	a.mu.Lock()
	a.status.Dropped[why]++
	a.mu.Unlock()
}

func (a *Agent) snapshot() {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := &a.status
	s.Node, s.Incarnation, s.Roles = a.cfg.Node, farm.Incarnation(a.inc), a.cfg.Roles.String()
	s.Leader, s.Epoch = a.leader.Node, a.leader.Epoch
	s.EM, s.RU, s.BU, s.Ledger = nil, nil, nil, nil
	if a.em != nil {
		st := a.em.Stats()
		s.EM = &st
		l := a.em.Ledger().Summary()
		s.Ledger = &l
	}
	if a.ru != nil {
		st := a.ru.Stats()
		s.RU = &st
	}
	if a.bu != nil {
		st := a.bu.Stats()
		s.BU = &st
	}
	s.Peers = s.Peers[:0]
	for n := range a.peers {
		s.Peers = append(s.Peers, n)
	}
	sort.Strings(s.Peers)
	s.Members = s.Members[:0]
	for n, m := range a.members {
		if n == a.cfg.Node {
			continue
		}
		ps := PeerStatus{Node: n, Incarnation: m.Incarnation, Roles: m.Roles, Address: m.Address, HTTP: m.HTTP}
		if p := a.peers[n]; p != nil && p.conn != nil && p.inc == uint64(m.Incarnation) {
			select {
			case <-p.done:
			default:
				ps.Connected = true
			}
		}
		s.Members = append(s.Members, ps)
	}
	sort.Slice(s.Members, func(i, j int) bool { return s.Members[i].Node < s.Members[j].Node })
	if a.pool != nil {
		s.SendPool = a.pool.status()
	}
}

// publish puts the EM's ledger in etcd for `sluice farm status`.
func (a *Agent) publish(ctx context.Context) {
	if a.em == nil || a.lead == nil {
		return
	}
	l, run := a.lead, a.cfg.Run.Run
	s := a.em.Ledger().Summary()
	go func() {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if err := l.PutLedger(pctx, run, s); err != nil && ctx.Err() == nil {
			a.log.Warn("farm: publish ledger", "err", err)
		}
	}()
}
