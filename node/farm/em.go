package farm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Clock is the time the EM and the trackers see; tests drive a fake one.
type Clock interface{ Now() time.Time }

// SystemClock is the wall clock.
type SystemClock struct{}

// Now is time.Now.
func (SystemClock) Now() time.Time { return time.Now() }

// Protocol is how work reaches BUs (see the package doc).
type Protocol uint8

// Protocols.
const (
	// Push: BUs give credits, the EM assigns and announces each assignment
	// to every RU, RUs send (LHCb, CBM).
	Push Protocol = 1
	// Pull: a BU's credit asks for work; the EM answers the BU only; the BU
	// requests the data from every RU (ATLAS, CMS).
	Pull Protocol = 2
)

func (p Protocol) String() string {
	switch p {
	case Push:
		return "push"
	case Pull:
		return "pull"
	}
	return fmt.Sprintf("protocol(%d)", uint8(p))
}

// ParseProtocol parses "push" or "pull".
func ParseProtocol(s string) (Protocol, error) {
	switch s {
	case "push":
		return Push, nil
	case "pull":
		return Pull, nil
	}
	return 0, fmt.Errorf("protocol %q: want push or pull", s)
}

// EMConfig is what an EM needs to know of the run.
type EMConfig struct {
	Protocol Protocol
	// AssignmentSize is the elements (event ids or packets) of one
	// assignment; a BU needs that much event credit to get one.
	AssignmentSize int
	// Linger is how long a partly filled assignment waits for more
	// announced elements before it goes out anyway (0: at once).
	Linger time.Duration
	// MaxOutstanding (pull) bounds a BU's unreleased assignments: the
	// traffic shaping of the pull protocol.
	MaxOutstanding int
	// Release is the run's release policy: RUs free an assignment's bytes
	// when its BU reports this outcome, so a BU that dies before it is
	// reassigned, and one that dies after loses what it had not decided.
	Release Outcome
	// BlockSize is how many assignment ids the EM reserves at a time.
	BlockSize uint64
	// ReconcileWait bounds a takeover (Reconcile): parties that have not
	// reported by then are given up on (counted), 0: no bound.
	ReconcileWait time.Duration
}

// Validate checks the configuration.
func (c EMConfig) Validate() error {
	switch {
	case c.Protocol != Push && c.Protocol != Pull:
		return fmt.Errorf("em: protocol %d: want push or pull", c.Protocol)
	case c.AssignmentSize < 1 || c.AssignmentSize > 1<<24:
		return fmt.Errorf("em: assignment size %d: want 1..%d", c.AssignmentSize, 1<<24)
	case c.Protocol == Pull && c.MaxOutstanding < 1:
		return fmt.Errorf("em: pull max_outstanding %d: want at least 1", c.MaxOutstanding)
	case c.Release < OutcomeReceived || c.Release > OutcomeDurable:
		return fmt.Errorf("em: release policy %v: want received, decided or durable", c.Release)
	case c.BlockSize < 1:
		return fmt.Errorf("em: id block size %d: want at least 1", c.BlockSize)
	case c.Linger < 0 || c.ReconcileWait < 0:
		return fmt.Errorf("em: linger %v, reconcile wait %v: want >= 0", c.Linger, c.ReconcileWait)
	}
	return nil
}

// Block is a range [First, End) of assignment ids the EM reserved.
type Block struct{ First, End uint64 }

// OutputKind says what an Output asks the EM's driver to do.
type OutputKind uint8

// Output kinds.
const (
	// OutAssign: send Assign to Assign.BU and, when ToRUs, to every RU.
	OutAssign OutputKind = 1 + iota
	// OutReserve: reserve the next block of assignment ids in etcd and
	// hand it to Reserved.
	OutReserve
	// OutRelease: send Release to every RU: the entries the EM accepted
	// that reached the run's release policy, so the RUs free those bytes.
	// RUs free only on what the EM relays: the EM decides, in one order,
	// whether an assignment was released or is reassigned, never both (a
	// BU's release reaching the RUs while the EM, told of its death first,
	// reassigns the work would leave the reassignment without data). ATLAS's
	// DFM sends the clears to the ROSs the same way.
	OutRelease
	// OutVoid: record Void in etcd (control.Client.PutVoid): the dead BU
	// incarnation's unreleased assignments, given to other BUs, whose
	// events it may have stored; it voids them when it comes back.
	OutVoid
)

// Output is one thing the EM wants done.
type Output struct {
	Kind    OutputKind
	Assign  Assign
	ToRUs   bool
	Release Release
	Void    VoidRecord
}

// VoidRecord names the assignments a BU incarnation held unreleased when
// the EM (of Epoch) declared it dead: they go to other BUs, so whatever
// that incarnation stored of them is void.
type VoidRecord struct {
	BU          string      `json:"bu"`
	Incarnation Incarnation `json:"incarnation"`
	Epoch       uint64      `json:"epoch"`
	Assigns     []Assign    `json:"assignments"`
}

// Failover is one BU incarnation declared dead and the reassignment of
// what it held: Suspected is when the EM was told (EM's clock), Done
// when the last of its Open unreleased assignments went to another BU
// (zero until then).
type Failover struct {
	BU          string      `json:"bu"`
	Incarnation Incarnation `json:"incarnation"`
	Open        int         `json:"open"`
	Reassigned  int         `json:"reassigned"`
	Suspected   time.Time   `json:"suspected"`
	Done        time.Time   `json:"done,omitzero"`
}

// maxFailovers bounds the failovers EMStats lists (the latest).
const maxFailovers = 16

// EMStats counts what the EM did and what it ignored.
type EMStats struct {
	Epoch      uint64 `json:"epoch"`
	Assigned   uint64 `json:"assigned"`   // assignments made, reassignments included
	Reassigned uint64 `json:"reassigned"` // of which reassignments
	Settled    uint64 `json:"settled"`    // assignments built (decided or durable)
	Returned   uint64 `json:"returned"`   // given back by BUs
	// Ignored messages, by why.
	StaleEpoch       uint64 `json:"stale_epoch"`       // credits for an older EM
	NewerEpoch       uint64 `json:"newer_epoch"`       // credits for a newer EM: this one is superseded
	StaleIncarnation uint64 `json:"stale_incarnation"` // from a BU incarnation that is not its live one
	UnknownBU        uint64 `json:"unknown_bu"`        // from a BU that never joined
	EarlyCredit      uint64 `json:"early_credit"`      // credits kept until their BU's membership came
	Adopted          uint64 `json:"adopted"`           // assignments in flight taken over from BUs' inventories
	AdoptedSettled   uint64 `json:"adopted_settled"`   // built under the old EM (carried over), their releases relayed again
	Conflicts        uint64 `json:"conflicts"`         // inventory entries overlapping adopted ones: ignored
	LateInventory    uint64 `json:"late_inventory"`    // inventories after the takeover ended, or for another epoch
	SilentParties    uint64 `json:"silent_parties"`    // takeover parties that never reported (ReconcileWait)
	RelayedDone      uint64 `json:"relayed_done"`      // RUs' unreleased assignments the inherited ledger had done: released
	// DuplicateAnnounced counts elements announced again (dropped).
	DuplicateAnnounced uint64 `json:"duplicate_announced"`
	Reconciling        bool   `json:"reconciling"`
	StaleAssignment    uint64 `json:"stale_assignment"` // releases of assignments settled or superseded
	NotYours           uint64 `json:"not_yours"`        // releases of another BU's assignment
	// Duplicates: elements BUs reported stored by a dead incarnation and
	// built again elsewhere; BadDuplicates: reports naming elements this
	// EM did not reassign from that incarnation (ignored).
	Duplicates    uint64 `json:"duplicates"`
	BadDuplicates uint64 `json:"bad_duplicates"`
	// BadUnbuilt: release entries naming unbuilt ids outside their
	// assignment, or all of it while reporting events (taken as built).
	BadUnbuilt uint64 `json:"bad_unbuilt,omitempty"`
	// Failovers are the latest BU failovers and how long each took.
	Failovers []Failover `json:"failovers,omitempty"`
	// State.
	Queued       int  `json:"queued"`        // elements announced and not assigned
	Open         int  `json:"open"`          // assignments below the release policy
	Undecided    int  `json:"undecided"`     // released (policy received) but not decided
	BUs          int  `json:"bus"`           // live BUs
	NeedIDs      bool `json:"need_ids"`      // work waits for a block of ids
	Superseded   bool `json:"superseded"`    // a newer EM exists
	IDsAvailable int  `json:"ids_available"` // reserved and unused
	// Credits is each live BU's event credit left, CreditBytes its byte
	// credit left (payload bytes; assignments are charged an estimate
	// from the bytes per element settled so far), OpenPerBU its open
	// assignments.
	Credits     map[string]int64 `json:"credits"`
	CreditBytes map[string]int64 `json:"credit_bytes"`
	OpenPerBU   map[string]int   `json:"open_per_bu"`
	// ByteLimited counts the times an assignment waited because every BU
	// with event credit lacked the byte credit for it.
	ByteLimited uint64 `json:"byte_limited"`
}

// assignment is the EM's record of one live assignment.
type assignment struct {
	a       Assign
	bu      *buState
	reached Outcome // highest outcome reported (0: none)
	at      time.Time
	// charged is the byte credit this EM took for it (an estimate, -1:
	// none, an assignment adopted at a takeover): settled, the BU gives
	// back the bytes it received, so the difference is put right then.
	charged int64
}

// buState is the EM's view of one BU incarnation.
type buState struct {
	id       string
	inc      uint64
	draining bool
	events   int64 // event credit left
	bytes    int64 // byte credit left
	weight   int64 // smooth weighted round-robin state
	open     map[uint64]*assignment
	// undecided: released at policy "received", not decided yet.
	undecided map[uint64]*assignment
}

// EM is the event manager of one epoch, a pure state machine: inputs are
// its methods (announcements, membership, credits, releases, ticks), its
// outputs (assignments to send, id blocks to reserve) are collected for
// the driver by Outputs. It never does I/O and is not safe for concurrent
// use; the driver serialises calls. Every announced element ends in the
// EM's Ledger as built by exactly one BU or lost with a reason.
type EM struct {
	cfg    EMConfig
	epoch  uint64
	clock  Clock
	ledger *Ledger

	queue workQueue
	bus   map[string]*buState
	gone  map[string]bool // BUs that had an incarnation declared dead
	// early holds credit from BUs whose membership the EM has not seen
	// yet (the transport can be faster than the etcd watch): applied at
	// their Join, so a BU's first credit is never lost.
	early  map[string]Credit
	order  []*buState // live BUs in join order, for round-robin
	live   map[uint64]*assignment
	blocks []Block
	// reservedEnd is the end of the last block reserved: ids below it
	// may have been used.
	reservedEnd uint64
	// nextID is the next unused id of blocks[0].
	nextID    uint64
	reserving bool
	flush     bool
	stats     EMStats
	out       []Output
	// bytesPer estimates an element's payload bytes from releases, to
	// charge byte credit before the bytes are known.
	bytesSeen, elementsSeen uint64

	// Takeover (Reconcile): parties still to report, announcements held
	// until they did, elements adopted from BUs' inventories.
	reconciling bool
	waitFor     map[string]bool
	held        []Unit
	since       time.Time
	adopted     map[UnitKey]*rangeSet
	reports     []report
	heldRel     []Release

	// Failovers: the latest, and the one each superseded id belongs to
	// until it is reassigned; voided: per dead incarnation, the elements
	// it held when it died (what it may report as duplicates).
	failovers  []*Failover
	supersedes map[uint64]*Failover
	voided     map[voidKey]map[UnitKey]*rangeSet
}

type voidKey struct {
	bu  string
	inc uint64
}

// maxEarlyCredit bounds the BUs whose credit waits for their membership.
const maxEarlyCredit = 1024

// ErrBadUnit: an announced unit is malformed (no range, ranges out of
// order, unknown kind).
var ErrBadUnit = errors.New("farm: bad unit")

// NewEM returns the EM of epoch (its election revision), with an empty
// ledger. It has no assignment ids yet: its first Outputs ask for a block.
func NewEM(cfg EMConfig, epoch uint64, clock Clock) (*EM, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &EM{cfg: cfg, epoch: epoch, clock: clock, ledger: NewLedger(),
		bus: map[string]*buState{}, gone: map[string]bool{}, early: map[string]Credit{}, live: map[uint64]*assignment{},
		supersedes: map[uint64]*Failover{}, voided: map[voidKey]map[UnitKey]*rangeSet{}}
	m.stats.Epoch = epoch
	m.wantIDs()
	return m, nil
}

// Ledger is the farm ledger the EM keeps.
func (m *EM) Ledger() *Ledger { return m.ledger }

// Epoch is the EM's epoch.
func (m *EM) Epoch() uint64 { return m.epoch }

// Outputs returns what the EM wants done since the last call, in order.
// The slice is reused by the next input: copy what must outlive it.
func (m *EM) Outputs() []Output {
	o := m.out
	m.out = m.out[:0]
	return o
}

// Stats returns the EM's counters and state.
func (m *EM) Stats() EMStats {
	s := m.stats
	s.Reconciling = m.reconciling
	s.Queued = m.queue.elements
	s.BUs = len(m.order)
	s.NeedIDs = m.idsLeft() == 0
	s.IDsAvailable = int(min(m.idsLeft(), 1<<31))
	s.Open, s.Undecided = 0, 0
	s.Credits, s.CreditBytes, s.OpenPerBU = map[string]int64{}, map[string]int64{}, map[string]int{}
	for _, f := range m.failovers {
		s.Failovers = append(s.Failovers, *f)
	}
	for _, b := range m.order {
		s.Open += len(b.open)
		s.Undecided += len(b.undecided)
		s.Credits[b.id] = b.events
		s.CreditBytes[b.id] = b.bytes
		s.OpenPerBU[b.id] = len(b.open)
	}
	return s
}

func (m *EM) idsLeft() uint64 {
	var n uint64
	for i, b := range m.blocks {
		if i == 0 {
			n += b.End - m.nextID
		} else {
			n += b.End - b.First
		}
	}
	return n
}

// wantIDs asks for another block when less than half a block is left.
func (m *EM) wantIDs() {
	if !m.reserving && m.idsLeft() < (m.cfg.BlockSize+1)/2 {
		m.reserving = true
		m.out = append(m.out, Output{Kind: OutReserve})
	}
}

// Reserved hands the EM the block of ids the driver reserved. Blocks must
// come in increasing order, above every id used.
func (m *EM) Reserved(b Block) error {
	m.reserving = false
	if b.End <= b.First || b.First == 0 {
		return fmt.Errorf("em: reserved block [%d, %d) is empty or starts at 0", b.First, b.End)
	}
	if b.First < m.reservedEnd {
		return fmt.Errorf("em: reserved block [%d, %d) starts below the last one's end %d", b.First, b.End, m.reservedEnd)
	}
	m.reservedEnd = b.End
	if len(m.blocks) == 0 {
		m.nextID = b.First
	}
	m.blocks = append(m.blocks, b)
	m.pump()
	return nil
}

func (m *EM) allocID() uint64 {
	id := m.nextID
	m.nextID++
	if m.nextID == m.blocks[0].End {
		m.blocks = m.blocks[1:]
		if len(m.blocks) > 0 {
			m.nextID = m.blocks[0].First
		}
	}
	m.wantIDs()
	return id
}

// checkUnit validates an announced unit (the encoder's rules).
func checkAnnounced(u Unit) error {
	if err := checkUnit(KindAssign, u); err != nil {
		return fmt.Errorf("%w: %v", ErrBadUnit, err)
	}
	return nil
}

// Announce queues u's elements for assignment and records them in the
// ledger. Errors: ErrBadUnit.
func (m *EM) Announce(u Unit) error {
	if err := checkAnnounced(u); err != nil {
		return err
	}
	if m.reconciling {
		m.held = append(m.held, Unit{Run: u.Run, Resync: u.Resync, Kind: u.Kind, Ranges: append([]Range(nil), u.Ranges...)})
		return nil
	}
	m.announce(u)
	m.pump()
	return nil
}

// announce queues the elements of u not announced before; the others
// (an RU announcing again, to a new EM, what an older one had) are
// counted and dropped: the EM never assigns an element twice.
func (m *EM) announce(u Unit) {
	rest, dup := m.ledger.fresh(u)
	m.stats.DuplicateAnnounced += dup
	if len(rest.Ranges) == 0 {
		return
	}
	m.ledger.Announce(rest)
	m.queue.pushBack(rest, m.clock.Now())
}

// Join registers BU bu's incarnation inc (its etcd membership record). An
// earlier incarnation of the same BU is dead: its work is reassigned.
func (m *EM) Join(bu string, inc uint64) {
	if b := m.bus[bu]; b != nil {
		if b.inc == inc {
			return
		}
		m.dead(b)
	}
	b := &buState{id: bu, inc: inc, open: map[uint64]*assignment{}, undecided: map[uint64]*assignment{}}
	m.bus[bu] = b
	m.order = append(m.order, b)
	if c, ok := m.early[bu]; ok {
		delete(m.early, bu)
		if c.Incarnation == inc {
			m.stats.EarlyCredit++
			m.Credit(c)
		}
	}
}

// Drain stops giving bu (incarnation inc) work; it finishes what it has.
func (m *EM) Drain(bu string, inc uint64) {
	if b := m.current(bu, inc); b != nil {
		b.draining = true
		b.events, b.bytes = 0, 0
	}
}

// Dead declares BU bu's incarnation inc gone (transport error, lost
// heartbeats, fenced, lease expired, or left after draining). Its
// unreleased assignments go to other BUs under new ids; what it had
// released but not decided (policy received) is lost. Later messages of
// that incarnation are ignored and counted.
func (m *EM) Dead(bu string, inc uint64) {
	if b := m.current(bu, inc); b != nil {
		m.dead(b)
		m.pump()
	}
}

func (m *EM) dead(b *buState) {
	delete(m.bus, b.id)
	m.gone[b.id] = true
	if m.reconciling {
		delete(m.waitFor, b.id)
		defer m.maybeReconciled()
	}
	for i, x := range m.order {
		if x == b {
			m.order = append(m.order[:i], m.order[i+1:]...)
			break
		}
	}
	now := m.clock.Now()
	// Pushed to the front newest first, so the oldest work goes first.
	open := sortedByID(b.open)
	// A failover is recorded (and its void record written) only when
	// there is work to move: a BU that leaves drained has none.
	var f *Failover
	void := VoidRecord{BU: b.id, Incarnation: Incarnation(b.inc), Epoch: m.epoch}
	if len(open) > 0 {
		f = &Failover{BU: b.id, Incarnation: Incarnation(b.inc), Open: len(open), Suspected: now}
		m.failovers = append(m.failovers, f)
		if len(m.failovers) > maxFailovers {
			m.failovers = m.failovers[len(m.failovers)-maxFailovers:]
		}
	}
	vk := voidKey{b.id, b.inc}
	for i := len(open) - 1; i >= 0; i-- {
		a := open[i]
		delete(m.live, a.a.ID)
		m.queue.pushFront(a.a.Unit, a.a.ID, now)
		m.supersedes[a.a.ID] = f
		void.Assigns = append(void.Assigns, a.a)
		if m.voided[vk] == nil {
			m.voided[vk] = map[UnitKey]*rangeSet{}
		}
		set := m.voided[vk][KeyOf(a.a.Unit)]
		if set == nil {
			set = &rangeSet{}
			m.voided[vk][KeyOf(a.a.Unit)] = set
		}
		for _, r := range a.a.Unit.Ranges {
			set.add(r.First, r.Last())
		}
	}
	if f != nil {
		slices.Reverse(void.Assigns)
		m.out = append(m.out, Output{Kind: OutVoid, Void: void})
	}
	for _, a := range sortedByID(b.undecided) {
		delete(m.live, a.a.ID)
		m.ledger.Lost(a.a.Unit, LostBUDeadAfterRelease)
	}
	b.open, b.undecided = nil, nil
}

// current returns bu's live state if inc is its live incarnation,
// counting the message as stale or unknown otherwise.
func (m *EM) current(bu string, inc uint64) *buState {
	b := m.bus[bu]
	switch {
	case b == nil && m.gone[bu]:
		m.stats.StaleIncarnation++
		return nil
	case b == nil:
		m.stats.UnknownBU++
		return nil
	case b.inc != inc:
		m.stats.StaleIncarnation++
		return nil
	}
	return b
}

// Credit takes a BU's credit: more events and bytes it can take. Credits
// for another epoch are ignored and counted; one for a newer epoch means
// this EM is superseded and stops assigning.
func (m *EM) Credit(c Credit) {
	switch {
	case c.Epoch < m.epoch:
		m.stats.StaleEpoch++
		return
	case c.Epoch > m.epoch:
		m.stats.NewerEpoch++
		m.stats.Superseded = true
		return
	}
	if m.bus[c.BU] == nil && !m.gone[c.BU] && len(m.early) < maxEarlyCredit {
		e := m.early[c.BU]
		if e.Incarnation != c.Incarnation {
			e = Credit{Epoch: c.Epoch, Incarnation: c.Incarnation, BU: c.BU}
		}
		e.Events += c.Events
		e.Bytes += c.Bytes
		m.early[c.BU] = e
		return
	}
	b := m.current(c.BU, c.Incarnation)
	if b == nil || b.draining {
		return
	}
	b.events += int64(c.Events)
	b.bytes += int64(min(c.Bytes, 1<<62))
	m.pump()
}

// Release takes a BU's release of some of its assignments. Entries of
// assignments that are not the sender incarnation's live ones (settled,
// superseded, another BU's) are ignored and counted.
func (m *EM) Release(r Release) {
	if m.reconciling {
		// It may be of an assignment the takeover will adopt.
		m.heldRel = append(m.heldRel, r)
		return
	}
	b := m.current(r.BU, r.Incarnation)
	if b == nil {
		return
	}
	relay := Release{Incarnation: r.Incarnation, BU: r.BU}
	for _, e := range r.Entries {
		if m.release(b, e) {
			relay.Entries = append(relay.Entries, e)
		}
	}
	if len(relay.Entries) > 0 {
		m.out = append(m.out, Output{Kind: OutRelease, Release: relay})
	}
	m.pump()
}

// release applies one entry; it reports whether the RUs may now free the
// assignment's bytes (the entry reached the release policy for the first
// time).
func (m *EM) release(b *buState, e ReleaseEntry) bool {
	a := m.live[e.Assignment]
	switch {
	case a == nil:
		m.stats.StaleAssignment++
		return false
	case a.bu != b:
		m.stats.NotYours++
		return false
	}
	if e.Outcome == OutcomeReturned {
		if _, ok := b.open[a.a.ID]; !ok {
			// Returned after its data was released: nobody holds it now.
			delete(b.undecided, a.a.ID)
			delete(m.live, a.a.ID)
			m.ledger.Lost(a.a.Unit, LostBUDeadAfterRelease)
			return false
		}
		m.stats.Returned++
		delete(b.open, a.a.ID)
		delete(m.live, a.a.ID)
		m.queue.pushFront(a.a.Unit, a.a.ID, m.clock.Now())
		return false
	}
	if e.Outcome <= a.reached {
		return false // repeated or late report of an outcome already known
	}
	first := a.reached < m.cfg.Release && e.Outcome >= m.cfg.Release
	a.reached = e.Outcome
	if e.Bytes > 0 && a.charged >= 0 {
		m.bytesSeen += e.Bytes
		m.elementsSeen += uint64(a.a.Unit.Len())
	}
	// Built means decided, and with policy durable also synced: until
	// then a dead BU's work is reassigned (the RUs still hold it).
	if e.Outcome >= max(OutcomeDecided, m.cfg.Release) {
		if a.charged >= 0 {
			// The BU's next credit gives back the bytes it received, not
			// the estimate charged.
			b.bytes += a.charged - int64(min(e.Bytes, 1<<62))
		}
		delete(b.open, a.a.ID)
		delete(b.undecided, a.a.ID)
		delete(m.live, a.a.ID)
		m.stats.Settled++
		if e.Events == 0 {
			// Built with no event at all: no RU's data for it reached the
			// BU within its wait (an assignment's elements are named by the
			// trigger source's packets, so each has data somewhere). Its
			// elements are lost, not built: counted built, the ledger
			// balanced while the events were missing from every store.
			m.ledger.Lost(a.a.Unit, LostTimedOut)
			return first
		}
		if un, ok := unbuiltOf(a.a.Unit, e.Unbuilt); ok {
			// Built with some ids that had no data at all: those are lost
			// (timed_out), the rest built.
			m.ledger.Lost(un, LostTimedOut)
			if rest, any := subtractUnit(a.a.Unit, rangeSetOf(un.Ranges)); any {
				m.ledger.Built(rest, b.id, e.Events)
			}
			return first
		} else if len(e.Unbuilt) > 0 {
			m.stats.BadUnbuilt++
		}
		m.ledger.Built(a.a.Unit, b.id, e.Events)
		return first
	}
	if first {
		// Policy received: the RUs drop the bytes; the BU alone has them.
		delete(b.open, a.a.ID)
		b.undecided[a.a.ID] = a
	}
	return first
}

// Duplicate takes a BU's report of events a dead incarnation of it had
// stored for assignments this EM gave to other BUs (see Duplicate): they
// are counted duplicate_after_failover in the ledger. Elements this EM did
// not reassign from that incarnation are ignored and counted
// (BadDuplicates).
func (m *EM) Duplicate(d Duplicate) {
	if checkUnit(KindDuplicate, d.Unit) != nil {
		m.stats.BadDuplicates++
		return
	}
	set := m.voided[voidKey{d.BU, d.Dead}][KeyOf(d.Unit)]
	for _, r := range d.Unit.Ranges {
		if set == nil || set.overlap(r.First, r.Last()) != uint64(r.N) {
			m.stats.BadDuplicates += uint64(d.Unit.Len())
			return
		}
	}
	m.stats.Duplicates += uint64(d.Unit.Len())
	m.ledger.Duplicate(d.Unit, d.BU)
}

// Tick lets partly filled assignments whose linger passed go out, and
// ends a takeover that waited ReconcileWait.
func (m *EM) Tick() {
	if m.reconciling && m.cfg.ReconcileWait > 0 && m.clock.Now().Sub(m.since) >= m.cfg.ReconcileWait {
		m.stats.SilentParties += uint64(len(m.waitFor))
		m.waitFor = nil
		m.maybeReconciled()
	}
	m.pump()
}

// PartyGone: a party of the takeover (an RU) left: it will not report.
// (A BU that dies is given up on by Dead.)
func (m *EM) PartyGone(name string) {
	if m.reconciling {
		delete(m.waitFor, name)
		m.maybeReconciled()
	}
}

// Flush sends partly filled assignments at once from now on (end of run:
// no more elements will join them).
func (m *EM) Flush() {
	m.flush = true
	m.pump()
}

// Stop ends the run: elements still queued are counted lost
// (run_stopped). Assignments in flight stay: their BUs may still build
// them.
func (m *EM) Stop() {
	for _, p := range m.queue.drain() {
		m.ledger.Lost(p.unit, LostRunStopped)
	}
}

// bytesFor estimates the payload bytes of n elements.
func (m *EM) bytesFor(n int) int64 {
	if m.elementsSeen == 0 {
		return 0
	}
	return int64(m.bytesSeen / m.elementsSeen * uint64(n))
}

// pump makes assignments while there is work, ids and a BU to take it.
func (m *EM) pump() {
	if m.stats.Superseded || m.reconciling {
		return
	}
	now := m.clock.Now()
	for m.idsLeft() > 0 {
		n, ok := m.queue.peek(m.cfg.AssignmentSize, now, m.cfg.Linger, m.flush)
		if !ok {
			return
		}
		b := m.pick(int64(n), m.bytesFor(n))
		if b == nil {
			return
		}
		u, old := m.queue.take(n)
		m.assign(b, u, old, now)
	}
}

func (m *EM) assign(b *buState, u Unit, old uint64, now time.Time) {
	a := &assignment{a: Assign{Epoch: m.epoch, ID: m.allocID(), Supersedes: old, Incarnation: b.inc, BU: b.id, Unit: u}, bu: b, at: now,
		charged: m.bytesFor(u.Len())}
	b.events -= int64(u.Len())
	b.bytes -= a.charged
	b.open[a.a.ID] = a
	m.live[a.a.ID] = a
	m.stats.Assigned++
	if old != 0 {
		m.stats.Reassigned++
		if f := m.supersedes[old]; f != nil {
			delete(m.supersedes, old)
			if f.Reassigned++; f.Reassigned == f.Open {
				f.Done = now
			}
		}
	}
	m.out = append(m.out, Output{Kind: OutAssign, Assign: a.a, ToRUs: m.cfg.Protocol == Push})
}

// pick chooses the BU for the next assignment of n elements and about
// bytes payload bytes: smooth weighted round-robin (nginx's) over the BUs
// with enough event and byte credit (and, in pull, fewer than
// MaxOutstanding open assignments), weighted by their event credit. A BU
// with three times the credit gets three times the assignments,
// interleaved rather than in bursts. A BU holding nothing takes an
// assignment larger than its byte credit (one larger than a BU's whole
// capacity would otherwise never go out).
func (m *EM) pick(n, bytes int64) *buState {
	var best *buState
	var total int64
	short := false
	for _, b := range m.order {
		if b.draining || b.events < n || (m.cfg.Protocol == Pull && len(b.open) >= m.cfg.MaxOutstanding) {
			continue
		}
		if b.bytes < bytes && (len(b.open) > 0 || len(b.undecided) > 0) {
			short = true
			continue
		}
		b.weight += b.events
		total += b.events
		if best == nil || b.weight > best.weight {
			best = b
		}
	}
	if best != nil {
		best.weight -= total
	} else if short {
		m.stats.ByteLimited++
	}
	return best
}

// sortedByID lists the assignments of a set by id.
func sortedByID(set map[uint64]*assignment) []*assignment {
	out := make([]*assignment, 0, len(set))
	for _, a := range set {
		out = append(out, a)
	}
	slices.SortFunc(out, func(x, y *assignment) int {
		switch {
		case x.a.ID < y.a.ID:
			return -1
		case x.a.ID > y.a.ID:
			return 1
		}
		return 0
	})
	return out
}

// Reconcile starts a takeover: this EM follows one that died, and must
// not assign what it already assigned. Until every party named (the BUs
// it knows, and the RU holding the trigger source) has sent its Inventory
// — or, for a BU, died — it assigns nothing and holds announcements. Then
// it keeps the assignments the BUs hold (adopted under their own ids, and
// announced again to the RUs that may have missed them), and assigns only
// the announced elements no BU holds. With no party it ends at once.
func (m *EM) Reconcile(parties []string) {
	m.reconciling = true
	m.since = m.clock.Now()
	m.waitFor = map[string]bool{}
	m.adopted = map[UnitKey]*rangeSet{}
	for _, p := range parties {
		m.waitFor[p] = true
	}
	m.maybeReconciled()
}

// Inventory takes a party's report (see Reconcile): a BU's assignments in
// flight and lately settled, an RU's lately released ones. They are
// resolved together once every party reported.
func (m *EM) Inventory(inv Inventory) {
	if !m.reconciling || inv.Epoch != m.epoch {
		m.stats.LateInventory++
		return
	}
	for _, e := range inv.Entries {
		if checkUnit(KindAssign, e.Unit) != nil || e.ID == 0 {
			m.stats.Conflicts++
			continue
		}
		m.reports = append(m.reports, report{e: e, fromBU: e.BU == inv.Node && e.Incarnation == inv.Incarnation})
	}
	delete(m.waitFor, inv.Node)
	m.maybeReconciled()
}

type report struct {
	e      InventoryEntry
	fromBU bool // its own BU reported it
}

// resolve decides each reported assignment: settled (an outcome at the
// settle level anywhere: its release may have reached only some RUs) is
// carried over and its release relayed to every RU; held by its BU, still
// live, is adopted; released at policy received with its BU gone is
// lost; anything else is forgotten (its elements are announced again and
// assigned anew; the RUs void the old id). Later ids win where two
// overlap (a reassignment over the one it superseded).
func (m *EM) resolve() {
	settle := max(OutcomeDecided, m.cfg.Release)
	type verdict struct {
		e               InventoryEntry
		settled, holder bool
		released        bool
		reached         Outcome
	}
	byID := map[uint64]*verdict{}
	for _, r := range m.reports {
		v := byID[r.e.ID]
		if v == nil {
			v = &verdict{e: r.e}
			byID[r.e.ID] = v
		}
		if r.e.Reached >= settle {
			v.settled = true
		}
		if r.e.Reached >= m.cfg.Release {
			v.released = true
		}
		if r.fromBU && r.e.Reached < settle {
			if b := m.bus[r.e.BU]; b != nil && b.inc == r.e.Incarnation {
				v.holder = true
				v.reached = max(v.reached, r.e.Reached)
			}
		}
	}
	ids := make([]uint64, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	relays := map[[2]string]*Release{}
	relay := func(e InventoryEntry, o Outcome) {
		k := [2]string{e.BU, fmt.Sprint(e.Incarnation)}
		if relays[k] == nil {
			relays[k] = &Release{Incarnation: e.Incarnation, BU: e.BU}
		}
		relays[k].Entries = append(relays[k].Entries, ReleaseEntry{Assignment: e.ID, Outcome: o})
	}
	now := m.clock.Now()
	for i := len(ids) - 1; i >= 0; i-- {
		v := byID[ids[i]]
		e := v.e
		if !v.settled && !v.holder && !v.released {
			if m.ledger.inheritedDone(e.Unit) {
				// An RU still holds what an earlier EM had settled (it died
				// before relaying the release): the RUs may free it now.
				m.stats.RelayedDone++
				relay(e, settle)
			}
			continue
		}
		set := m.adopted[KeyOf(e.Unit)]
		if set == nil {
			set = &rangeSet{}
			m.adopted[KeyOf(e.Unit)] = set
		}
		overlap := false
		for _, r := range e.Unit.Ranges {
			if set.overlap(r.First, r.Last()) > 0 {
				overlap = true
			}
		}
		if overlap {
			m.stats.Conflicts++
			continue
		}
		for _, r := range e.Unit.Ranges {
			set.add(r.First, r.Last())
		}
		m.ledger.Announce(e.Unit)
		switch {
		case v.settled:
			m.stats.AdoptedSettled++
			m.ledger.Carried(e.Unit, e.BU)
			relay(e, settle)
		case v.holder:
			m.stats.Adopted++
			b := m.bus[e.BU]
			a := Assign{Epoch: e.Epoch, ID: e.ID, Supersedes: e.Supersedes, Incarnation: e.Incarnation, BU: e.BU, Unit: e.Unit}
			rec := &assignment{a: a, bu: b, reached: v.reached, at: now, charged: -1}
			m.live[e.ID] = rec
			if v.reached >= m.cfg.Release {
				b.undecided[e.ID] = rec
				relay(e, v.reached)
			} else {
				b.open[e.ID] = rec
				// The RUs that missed it when it was made learn it now.
				m.out = append(m.out, Output{Kind: OutAssign, Assign: a, ToRUs: m.cfg.Protocol == Push})
			}
		default: // released (policy received), its BU gone before deciding
			m.ledger.Lost(e.Unit, LostBUDeadAfterRelease)
			relay(e, m.cfg.Release)
		}
	}
	keys := make([][2]string, 0, len(relays))
	for k := range relays {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y [2]string) int {
		if x[0] != y[0] {
			return strings.Compare(x[0], y[0])
		}
		return strings.Compare(x[1], y[1])
	})
	for _, k := range keys {
		m.out = append(m.out, Output{Kind: OutRelease, Release: *relays[k]})
	}
	m.reports = nil
}

// maybeReconciled ends the takeover once every party reported: the held
// announcements, less what was adopted, become work; what the ledger
// inherited open and nobody announced again is counted lost (unheld).
func (m *EM) maybeReconciled() {
	if !m.reconciling || len(m.waitFor) > 0 {
		return
	}
	m.reconciling = false
	m.resolve()
	rels := m.heldRel
	m.heldRel = nil
	for _, r := range rels {
		m.Release(r)
	}
	// Announced again, what was adopted is dropped as a duplicate.
	for _, u := range m.held {
		m.announce(u)
	}
	// What the inherited ledger had open and nobody holds is lost.
	m.ledger.Unheld()
	m.held, m.waitFor = nil, nil
	m.pump()
}

// unbuiltOf is the unit of an assignment's unbuilt ids (ok: u is of event
// ids, rs is not empty and lies inside u and not all of it).
func unbuiltOf(u Unit, rs []Range) (Unit, bool) {
	if u.Kind != UnitEvents || len(rs) == 0 {
		return Unit{}, false
	}
	in := rangeSetOf(u.Ranges)
	var n uint64
	for _, r := range rs {
		if in.overlap(r.First, r.Last()) != uint64(r.N) {
			return Unit{}, false
		}
		n += uint64(r.N)
	}
	if n >= uint64(u.Len()) {
		return Unit{}, false
	}
	return Unit{Run: u.Run, Resync: u.Resync, Kind: u.Kind, Ranges: rs}, true
}
