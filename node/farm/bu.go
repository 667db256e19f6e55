package farm

import (
	"fmt"
	"sort"
	"time"
)

// BUConfig is what a BU's tracker needs to know.
type BUConfig struct {
	Node     string
	Protocol Protocol
	// Release is the run's release policy: the BU tells the EM when each
	// assignment reaches it (and when it is decided).
	Release Outcome
	// ReleaseGroup is how many release entries go in one message; a
	// partial group goes after ReleaseLinger.
	ReleaseGroup  int
	ReleaseLinger time.Duration
	// Slots and SlotBytes are the BU's capacity: elements and payload
	// bytes it can hold from assignment to decision. Its credits never
	// promise more.
	Slots     int
	SlotBytes int64
	// Wait is how long an assignment waits for the data of every source
	// before the BU builds it without the rest (flagged incomplete) —
	// except for the sources of a live RU that has not sent its final
	// data message for it: those it waits for up to FinalWait. That RU
	// decides what it sends without (its own Wait, longer for a source of
	// its that is behind: RUConfig.BehindWait); an RU that dies is seen by
	// the transport or its lease (RUDead) and one run control masks by
	// Mask, so the BU need not guess from a timer that its data will not
	// come, and build without the data of a live, slow readout.
	Wait time.Duration
	// FinalWait bounds the wait for a live RU's final data, from the
	// assignment (0 or below Wait: Wait). It is a backstop, longer than
	// an RU waits (its BehindLimit) plus the transfer.
	FinalWait time.Duration
	// Sources are every source of the run (its source map): an assignment
	// is complete when each has sent its data or is known not to.
	Sources []uint32
	// MaxRequests (pull) bounds the requests this BU has outstanding at
	// the RUs at once, over all its assignments: a request is outstanding
	// from when it is sent until that RU's final data message for it
	// comes, the RU dies or the assignment completes. This is pull's
	// traffic shaping: at most MaxRequests RUs send to this BU at a time,
	// so a switch port's queue sees MaxRequests bursts, not one per RU.
	// 0: no bound (each assignment is requested from every RU at once).
	MaxRequests int
	// Retain is how long the BU remembers assignments it settled, to tell
	// a new EM about them (the old one may have died before relaying the
	// release to every RU; default 10s: longer than a takeover takes).
	Retain time.Duration
}

// BUOutputKind says what a BUOutput asks the BU's driver to do.
type BUOutputKind uint8

// BU output kinds.
const (
	// BUCredit: send Credit to the EM.
	BUCredit BUOutputKind = 1 + iota
	// BURequest: send Request to RU (pull).
	BURequest
	// BUComplete: every source's data of Assignment is in, or known not
	// to come (its RU said so, or died), or the wait ended: build it now;
	// Missing lists the sources without data (incomplete in its events).
	BUComplete
	// BURelease: send Release to the EM (which relays to the RUs what
	// they may free: see OutRelease).
	BURelease
	// BUDrained: the draining BU has nothing in flight: it may leave.
	BUDrained
	// BUDiscard: data kept for Assignment.ID, whose assignment never came
	// within the wait, is dropped: release its payloads.
	BUDiscard
)

// BUOutput is one thing the BU tracker wants done.
type BUOutput struct {
	Kind       BUOutputKind
	Credit     Credit
	RU         string
	Request    Request
	Assignment Assign
	Missing    []uint32
	Release    Release
}

// BUStats counts what the BU tracker did and ignored.
type BUStats struct {
	Epoch      uint64 `json:"epoch"`
	InFlight   int    `json:"in_flight"`   // assignments not decided
	SlotsUsed  int    `json:"slots_used"`  // their elements
	BytesUsed  int64  `json:"bytes_used"`  // their payload bytes received
	Completed  uint64 `json:"completed"`   // assignments whose data is all in
	Incomplete uint64 `json:"incomplete"`  // completed with RUs missing
	OldEpoch   uint64 `json:"old_epoch"`   // assignments of a deposed EM: ignored
	StaleData  uint64 `json:"stale_data"`  // data for another incarnation or an assignment settled
	LateData   uint64 `json:"late_data"`   // data for an assignment already built without it
	EarlyData  uint64 `json:"early_data"`  // data before its assignment (kept until it comes)
	Duplicates uint64 `json:"duplicates"`  // a second final data message of one RU
	Released   uint64 `json:"released"`    // release entries sent
	Unknown    uint64 `json:"unknown_ids"` // outcomes reported for ids not in flight
	Discarded  uint64 `json:"discarded"`   // early data whose assignment never came
	// WaitedFinal: assignments that waited past Wait for a live RU's
	// final data; FinalTimedOut: of those, built at FinalWait without it.
	WaitedFinal   uint64 `json:"waited_final"`
	FinalTimedOut uint64 `json:"final_timed_out"`
}

type buAssign struct {
	a        Assign
	wait     map[uint32]bool // sources whose data it waits for
	missing  map[uint32]bool // sources known not to come
	finals   map[string]bool // RUs whose final data message came
	bytes    uint64
	since    time.Time
	complete bool
	waited   bool // counted in WaitedFinal
	reached  Outcome
	unbuilt  []Range // ids no RU's data came for (Unbuilt)
}

// maxEarly bounds the assignments a BU keeps data for before their
// assignment comes (beyond it, data is refused as stale: counted).
const maxEarly = 1 << 14

type earlyData struct {
	from    string
	h       DataHeader
	sources []uint32
	at      time.Time
}

type retained struct {
	e  InventoryEntry
	at time.Time
}

// BU tracks one BU incarnation's assignments: credits to the EM within
// its capacity, requests to the RUs (pull), completeness of each
// assignment from the RUs' data (per assignment: assignments complete out
// of order and reassigned ones arrive late by design), and grouped
// releases as the build pipeline reports outcomes. Pure state machine
// like EM.
type BU struct {
	cfg    BUConfig
	inc    uint64
	clock  Clock
	epoch  uint64
	rus    map[string][]uint32 // live RUs and their sources
	dead   map[uint32]bool     // sources whose RU died (none took them over)
	masked map[uint32]bool     // sources run control masked for the rest of the run
	as     map[uint64]*buAssign
	early  map[uint64][]earlyData
	done   rangeSet // settled ids, to tell stale data apart (ids grow: a few ranges)
	slots  int
	bytes  int64
	credit int // slots granted to the EM of this epoch, not yet assigned
	// freed is the payload bytes of assignments settled since the last
	// credit: the next one gives them back to the EM (byte credit, like
	// event credit, is an increment: the EM charges each assignment an
	// estimate of its bytes and settles it at the bytes received).
	freed int64
	rel   []ReleaseEntry
	relAt time.Time
	kept  []retained // settled recently, oldest first
	drain bool
	stats BUStats
	out   []BUOutput
	// Pull's request window (MaxRequests): requests waiting to be sent,
	// oldest assignment first, and those sent whose RU has not answered.
	reqWait []reqKey
	reqOut  map[reqKey]bool
}

// reqKey is one request: an assignment asked of one RU.
type reqKey struct {
	id uint64
	ru string
}

// NewBU returns the tracker of BU incarnation inc.
func NewBU(cfg BUConfig, inc uint64, clock Clock) (*BU, error) {
	switch {
	case cfg.Node == "":
		return nil, fmt.Errorf("bu: no node id")
	case cfg.Protocol != Push && cfg.Protocol != Pull:
		return nil, fmt.Errorf("bu: protocol %v", cfg.Protocol)
	case cfg.Release < OutcomeReceived || cfg.Release > OutcomeDurable:
		return nil, fmt.Errorf("bu: release policy %v", cfg.Release)
	case cfg.MaxRequests < 0:
		return nil, fmt.Errorf("bu: max requests %d: want >= 0", cfg.MaxRequests)
	case cfg.ReleaseGroup < 1 || cfg.Slots < 1 || cfg.SlotBytes < 1:
		return nil, fmt.Errorf("bu: release group %d, slots %d, slot bytes %d: want positive", cfg.ReleaseGroup, cfg.Slots, cfg.SlotBytes)
	}
	if len(cfg.Sources) == 0 {
		return nil, fmt.Errorf("bu: no source")
	}
	return &BU{cfg: cfg, inc: inc, clock: clock, rus: map[string][]uint32{}, dead: map[uint32]bool{}, masked: map[uint32]bool{}, as: map[uint64]*buAssign{},
		early: map[uint64][]earlyData{}, reqOut: map[reqKey]bool{}}, nil
}

// Outputs returns what the BU wants done since the last call (reused by
// the next input).
func (b *BU) Outputs() []BUOutput {
	o := b.out
	b.out = b.out[:0]
	return o
}

// Stats returns the tracker's counters.
func (b *BU) Stats() BUStats {
	s := b.stats
	s.Epoch, s.InFlight, s.SlotsUsed, s.BytesUsed = b.epoch, len(b.as), b.slots, b.bytes
	return s
}

// Lead tells the BU that the EM of epoch leads. The BU grants it all its
// free capacity (credits are per epoch: what an earlier EM was granted is
// void).
func (b *BU) Lead(epoch uint64) {
	if epoch <= b.epoch {
		return
	}
	b.epoch = epoch
	b.credit = 0
	// The whole free capacity: what the payloads in flight leave.
	b.freed = max(0, b.cfg.SlotBytes-b.bytes)
	b.grant()
}

// grant credits the EM with the event capacity neither in use nor
// granted, and the payload bytes freed since the last credit.
func (b *BU) grant() {
	if b.epoch == 0 || b.drain {
		return
	}
	free := max(0, b.cfg.Slots-b.slots-b.credit)
	if free == 0 && b.freed == 0 {
		return
	}
	b.credit += free
	bytes := b.freed
	b.freed = 0
	b.out = append(b.out, BUOutput{Kind: BUCredit, Credit: Credit{Epoch: b.epoch, Incarnation: b.inc, BU: b.cfg.Node,
		Events: uint32(min(free, 1<<31)), Bytes: uint64(bytes)}})
}

// RUJoin tells the BU that ru reads out sources (from its membership
// record): if it dies, assignments stop waiting for them.
// In pull, assignments still waiting for its sources are requested from
// it at once (they were requested only from the RUs known then).
func (b *BU) RUJoin(ru string, sources []uint32) {
	_, known := b.rus[ru]
	b.rus[ru] = sources
	for _, s := range sources {
		delete(b.dead, s)
	}
	if known || b.cfg.Protocol != Pull {
		return
	}
	for _, a := range b.sorted() {
		if a.complete {
			continue
		}
		for _, s := range sources {
			if a.wait[s] {
				b.request(a.a.ID, ru)
				break
			}
		}
	}
	b.pump()
}

// RUDead stops waiting for ru's sources at once, for its assignments and
// the later ones: their events are built without them.
func (b *BU) RUDead(ru string) {
	srcs, ok := b.rus[ru]
	if !ok {
		return
	}
	delete(b.rus, ru)
	for _, s := range srcs {
		b.dead[s] = true
	}
	for _, a := range b.sorted() {
		if a.complete || a.finals[ru] {
			continue
		}
		for _, s := range srcs {
			if a.wait[s] {
				delete(a.wait, s)
				a.missing[s] = true
			}
		}
		b.check(a)
	}
	b.answered(func(k reqKey) bool { return k.ru == ru })
}

// request queues assignment id's request to ru; pump sends it when the
// window has room.
func (b *BU) request(id uint64, ru string) {
	b.reqWait = append(b.reqWait, reqKey{id, ru})
}

// pump sends waiting requests while the window (MaxRequests) has room.
// Invariant: len(reqOut) <= MaxRequests when it is set; a waiting
// request whose assignment completed or whose RU died meanwhile is
// dropped unsent.
func (b *BU) pump() {
	n := 0
	for ; n < len(b.reqWait); n++ {
		if b.cfg.MaxRequests > 0 && len(b.reqOut) >= b.cfg.MaxRequests {
			break
		}
		k := b.reqWait[n]
		a := b.as[k.id]
		_, live := b.rus[k.ru]
		if a == nil || a.complete || a.finals[k.ru] || !live {
			continue
		}
		b.reqOut[k] = true
		b.out = append(b.out, BUOutput{Kind: BURequest, RU: k.ru, Request: Request(a.a)})
	}
	b.reqWait = b.reqWait[:copy(b.reqWait, b.reqWait[n:])]
}

// answered ends the outstanding requests done says are answered, then
// sends what now fits.
func (b *BU) answered(done func(reqKey) bool) {
	for k := range b.reqOut {
		if done(k) {
			delete(b.reqOut, k)
		}
	}
	b.pump()
}

// Mask stops waiting for sources for the rest of the run (run control
// masked them, or the RU that read them out): assignments in flight and
// later ones are complete without them, listed missing. An RU joining with
// a masked source does not undo it.
func (b *BU) Mask(sources []uint32) {
	for _, s := range sources {
		b.masked[s] = true
	}
	for _, a := range b.sorted() {
		if a.complete {
			continue
		}
		for _, s := range sources {
			if a.wait[s] {
				delete(a.wait, s)
				a.missing[s] = true
			}
		}
		b.check(a)
	}
}

func (b *BU) sorted() []*buAssign {
	out := make([]*buAssign, 0, len(b.as))
	for _, a := range b.as {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].a.ID < out[j].a.ID })
	return out
}

// Assign takes an assignment from the EM. One of a deposed EM (epoch
// below the leader's) is ignored and counted.
func (b *BU) Assign(a Assign) {
	if a.Incarnation != b.inc || a.BU != b.cfg.Node {
		b.stats.StaleData++
		return
	}
	if _, ok := b.as[a.ID]; ok || b.done.overlap(a.ID, a.ID) > 0 {
		return // known (a new EM announcing what it adopted)
	}
	if a.Epoch < b.epoch {
		b.stats.OldEpoch++
		return
	}
	ba := &buAssign{a: a, wait: map[uint32]bool{}, missing: map[uint32]bool{}, finals: map[string]bool{}, since: b.clock.Now()}
	for _, s := range b.cfg.Sources {
		if b.dead[s] || b.masked[s] {
			ba.missing[s] = true
		} else {
			ba.wait[s] = true
		}
	}
	b.as[a.ID] = ba
	n := a.Unit.Len()
	b.slots += n
	b.credit = max(0, b.credit-n)
	if b.cfg.Protocol == Pull {
		rus := make([]string, 0, len(b.rus))
		for ru := range b.rus {
			rus = append(rus, ru)
		}
		sort.Strings(rus)
		for _, ru := range rus {
			b.request(a.ID, ru)
		}
		b.pump()
	}
	for _, d := range b.early[a.ID] {
		b.data(ba, d.from, d.h, d.sources)
	}
	delete(b.early, a.ID)
	b.check(ba)
}

// Data takes an RU's data message: its header and the sources whose
// packets its payload holds. It reports whether the payload belongs to a
// live assignment of this incarnation still being gathered (false: the
// caller drops it, counted here). Data may come before its assignment
// (push: RUs and BU hear of it at once): it is kept until the assignment
// comes. An RU's final message means its sources without data in any of
// its messages will not come (the RU's own wait gave up on them).
func (b *BU) Data(from string, h DataHeader, sources []uint32) bool {
	if h.Incarnation != b.inc || b.done.overlap(h.Assignment, h.Assignment) > 0 {
		b.stats.StaleData++
		return false
	}
	a := b.as[h.Assignment]
	if a == nil {
		if len(b.early) >= maxEarly {
			b.stats.StaleData++
			return false
		}
		b.stats.EarlyData++
		b.early[h.Assignment] = append(b.early[h.Assignment], earlyData{from, h, sources, b.clock.Now()})
		return true
	}
	if a.complete {
		b.stats.LateData++
		return false
	}
	b.data(a, from, h, sources)
	b.check(a)
	return true
}

func (b *BU) data(a *buAssign, from string, h DataHeader, sources []uint32) {
	a.bytes += h.PayloadBytes
	b.bytes += int64(h.PayloadBytes)
	for _, s := range sources {
		delete(a.wait, s)
	}
	if h.Flags&DataFinal != 0 {
		if a.finals[from] {
			b.stats.Duplicates++
		}
		a.finals[from] = true
		if b.reqOut[reqKey{a.a.ID, from}] {
			delete(b.reqOut, reqKey{a.a.ID, from})
			b.pump()
		}
		for _, s := range b.rus[from] {
			if a.wait[s] {
				delete(a.wait, s)
				a.missing[s] = true
			}
		}
	}
}

// check completes an assignment whose data is all in.
func (b *BU) check(a *buAssign) {
	if a.complete || len(a.wait) > 0 {
		return
	}
	b.complete(a)
}

func (b *BU) complete(a *buAssign) {
	a.complete = true
	b.stats.Completed++
	var miss []uint32
	for s := range a.missing {
		miss = append(miss, s)
	}
	for s := range a.wait {
		miss = append(miss, s)
	}
	sort.Slice(miss, func(i, j int) bool { return miss[i] < miss[j] })
	if len(miss) > 0 {
		b.stats.Incomplete++
	}
	b.out = append(b.out, BUOutput{Kind: BUComplete, Assignment: a.a, Missing: miss})
	if len(b.reqOut) > 0 {
		b.answered(func(k reqKey) bool { return k.id == a.a.ID })
	}
	b.Outcome(a.a.ID, OutcomeReceived, 0)
}

// Unbuilt is the build pipeline saying which ids of assignment id (of
// event ids) no RU's data came for: no event is built for them, and the
// releases of the assignment name them so the EM counts them lost rather
// than built. rs are ascending and separated; call it before the decided
// outcome.
func (b *BU) Unbuilt(id uint64, rs []Range) {
	if a := b.as[id]; a != nil && a.a.Unit.Kind == UnitEvents && len(rs) > 0 {
		a.unbuilt = append([]Range(nil), rs...)
	}
}

// Outcome is the build pipeline reporting how far assignment id got
// (events built, for decided and durable). Outcomes at or past the
// release policy, and decided (the EM settles on it), are released in
// groups; decided frees the assignment's capacity for new credit.
func (b *BU) Outcome(id uint64, o Outcome, events uint32) {
	a := b.as[id]
	if a == nil {
		b.stats.Unknown++
		return
	}
	if o <= a.reached {
		return
	}
	a.reached = o
	if o >= b.cfg.Release || o >= OutcomeDecided {
		b.rel = append(b.rel, ReleaseEntry{Assignment: id, Outcome: o, Events: events, Bytes: a.bytes, Unbuilt: a.unbuilt})
		if len(b.rel) == 1 {
			b.relAt = b.clock.Now()
		}
	}
	if o >= OutcomeDecided && o >= b.cfg.Release {
		delete(b.as, id)
		b.done.add(id, id)
		b.kept = append(b.kept, retained{InventoryEntry{ID: id, Supersedes: a.a.Supersedes, Epoch: a.a.Epoch,
			Incarnation: b.inc, BU: b.cfg.Node, Reached: o, Unit: a.a.Unit}, b.clock.Now()})
		b.slots -= a.a.Unit.Len()
		b.bytes -= int64(a.bytes)
		b.freed += int64(a.bytes)
	}
	if len(b.rel) >= b.cfg.ReleaseGroup {
		b.flush()
	}
}

func (b *BU) flush() {
	if len(b.rel) == 0 {
		return
	}
	b.stats.Released += uint64(len(b.rel))
	b.out = append(b.out, BUOutput{Kind: BURelease, Release: Release{Incarnation: b.inc, BU: b.cfg.Node,
		Entries: append([]ReleaseEntry(nil), b.rel...)}})
	b.rel = b.rel[:0]
	b.grant()
	if b.drain && len(b.as) == 0 {
		b.out = append(b.out, BUOutput{Kind: BUDrained})
	}
}

// Tick completes assignments whose wait for data is over and sends a
// partial group of releases whose linger passed.
func (b *BU) Tick() {
	now := b.clock.Now()
	for _, a := range b.sorted() {
		if a.complete || now.Sub(a.since) < b.cfg.Wait {
			continue
		}
		if b.liveRUOwes(a) {
			if now.Sub(a.since) < b.cfg.FinalWait {
				if !a.waited {
					a.waited = true
					b.stats.WaitedFinal++
				}
				continue
			}
			b.stats.FinalTimedOut++
		}
		b.complete(a)
	}
	if len(b.rel) > 0 && now.Sub(b.relAt) >= b.cfg.ReleaseLinger {
		b.flush()
	}
	retain := b.cfg.Retain
	if retain == 0 {
		retain = 10 * time.Second
	}
	i := 0
	for i < len(b.kept) && now.Sub(b.kept[i].at) >= retain {
		i++
	}
	b.kept = b.kept[i:]
	var gone []uint64
	for id, ds := range b.early {
		if now.Sub(ds[0].at) >= b.cfg.Wait {
			gone = append(gone, id)
		}
	}
	sort.Slice(gone, func(i, j int) bool { return gone[i] < gone[j] })
	for _, id := range gone {
		delete(b.early, id)
		b.stats.Discarded++
		b.out = append(b.out, BUOutput{Kind: BUDiscard, Assignment: Assign{ID: id}})
	}
}

// liveRUOwes reports whether a waits for a source of a live RU that has
// not sent its final data message for it (see BUConfig.Wait).
func (b *BU) liveRUOwes(a *buAssign) bool {
	for ru, srcs := range b.rus {
		if a.finals[ru] {
			continue
		}
		for _, s := range srcs {
			if a.wait[s] {
				return true
			}
		}
	}
	return false
}

// Inventory is what this BU tells a new EM of epoch: its assignments in
// flight with how far each got, and those it settled within Retain.
func (b *BU) Inventory(epoch uint64) Inventory {
	inv := Inventory{Epoch: epoch, Incarnation: b.inc, Node: b.cfg.Node}
	for _, a := range b.sorted() {
		inv.Entries = append(inv.Entries, InventoryEntry{ID: a.a.ID, Supersedes: a.a.Supersedes, Epoch: a.a.Epoch,
			Incarnation: b.inc, BU: b.cfg.Node, Reached: a.reached, Unit: a.a.Unit})
	}
	for _, k := range b.kept {
		inv.Entries = append(inv.Entries, k.e)
	}
	return inv
}

// PendingReleases is the number of release entries waiting for their
// group to fill or linger out.
func (b *BU) PendingReleases() int { return len(b.rel) }

// FlushReleases sends the pending release entries now (a draining node
// about to leave must not leave them unsent: the EM would take the
// assignments for lost with the node and build them again elsewhere).
func (b *BU) FlushReleases() { b.flush() }

// Drain stops new credit; BUDrained comes once nothing is in flight.
func (b *BU) Drain() {
	b.drain = true
	if len(b.as) == 0 && len(b.rel) == 0 {
		b.out = append(b.out, BUOutput{Kind: BUDrained})
	}
}
