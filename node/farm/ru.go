package farm

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"time"
)

// RUConfig is what an RU's holdings tracker needs to know.
type RUConfig struct {
	// Sources are the sources this RU reads out: every assignment needs
	// data of each of them.
	Sources []uint32
	// Release is the run's release policy: an assignment's bytes are freed
	// when its BU reports this outcome.
	Release Outcome
	// Wait is how long an assignment waits for data of its elements that
	// has not arrived before it is sent without it (flag DataMissing,
	// counted by source), unless a source it lacks is behind (below).
	Wait time.Duration
	// BehindWait and BehindLimit: past Wait, an assignment waits on while
	// a source of this RU it lacks data of is behind it — has not reached
	// its last element — and still sending: a packet of it came within
	// the last BehindWait (before its first packet: since the tracker
	// started, so a readout starting late is waited for too) and its
	// readout has not ended (ReadoutEnded). It waits so at most
	// BehindLimit after it was assigned. The readout of a loaded node
	// runs seconds behind the others' (its boards starved of CPU, or
	// started later): its data comes, only after the EM announced the
	// assignments the trigger source named, and without this each went
	// without it (built incomplete, the data late). BehindWait <= 0: no
	// source is waited for past Wait.
	BehindWait, BehindLimit time.Duration
	// Names: this RU holds the trigger source (TriggerSource): its
	// packets name the elements (announced to the EM), and it tells the
	// other RUs which it named when it names no more (End).
	Names         bool
	TriggerSource uint32
	// Retain is how long the RU remembers the releases it applied, to
	// tell a new EM (the old one may have died having relayed a release
	// to some RUs only; default 10s).
	Retain time.Duration
}

// Packet is one multi-fragment packet an RU holds: Source's data for
// elements [First, First+N) of Key (event ids; for UnitPackets the
// packet's sequence number with N 1). Handle is the caller's (its bytes
// and how to release them); the tracker hands it back in RUSend and
// RUFree.
type Packet struct {
	Key    UnitKey
	Source uint32
	First  uint64
	N      uint32
	Bytes  int
	Handle any
}

// UnitKey names a numbering space: elements of one run, resync and kind.
type UnitKey struct {
	Run, Resync uint32
	Kind        UnitKind
}

// KeyOf is u's numbering space.
func KeyOf(u Unit) UnitKey { return UnitKey{u.Run, u.Resync, u.Kind} }

// RUOutputKind says what an RUOutput asks the RU's driver to do.
type RUOutputKind uint8

// RU output kinds.
const (
	// RUSend: send Packets to BU (incarnation Incarnation) as the data of
	// assignment Header.Assignment, with Header.
	RUSend RUOutputKind = 1 + iota
	// RUFree: no assignment needs Packet any more: release its bytes.
	RUFree
)

// RUOutput is one thing the RU tracker wants done.
type RUOutput struct {
	Kind    RUOutputKind
	BU      string
	Header  DataHeader
	Packets []*Packet // RUSend, in source then element order
	Packet  *Packet   // RUFree
}

// RUStats counts what the RU tracker did and ignored.
type RUStats struct {
	Held      int               `json:"held_packets"`
	HeldBytes int64             `json:"held_bytes"`
	Pending   int               `json:"pending_assignments"` // assigned, waiting for data
	Sent      int               `json:"sent_assignments"`    // sent, not released
	Freed     uint64            `json:"freed_packets"`
	Duplicate uint64            `json:"duplicate_packets"` // a packet overlapping one held of the same source: dropped
	Late      uint64            `json:"late_packets"`      // packets with data for elements whose assignments already went (or were released) without it
	Stale     uint64            `json:"stale_releases"`    // releases of another incarnation or BU, or unknown ids
	Voided    uint64            `json:"voided"`            // assignments of an older EM replaced by a newer one's
	Missing   map[uint32]uint64 `json:"missing_by_source"` // elements sent without this source's data
	// WaitedBehind: assignments that waited past Wait for a source of
	// this RU that was behind them (RUConfig.BehindWait).
	WaitedBehind uint64 `json:"waited_behind"`
	// NeverAnnounced: elements of held packets that the trigger source
	// never named (after its End), by source: freed unsent.
	NeverAnnounced map[uint32]uint64 `json:"never_announced_by_source,omitempty"`
	BytesPerBU     map[string]int64  `json:"bytes_held_per_bu"` // bytes of sent, unreleased assignments
}

type ruPacket struct {
	p        *Packet
	refs     int    // assignments holding it, not released
	assigned uint64 // its elements covered by assignments so far
	users    []*ruAssign
	released rangeSet // its elements whose assignment was released
}

type ruKept struct {
	e  InventoryEntry
	at time.Time
}

type unitSig struct {
	key   UnitKey
	first uint64
	n     int
}

func sigOf(u Unit) unitSig { return unitSig{KeyOf(u), u.Ranges[0].First, u.Len()} }

type ruAssign struct {
	a       Assign
	packets []*ruPacket
	since   time.Time
	sent    bool
	waited  bool // counted in WaitedBehind
	bytes   int64
}

// sourceSeen is how far a source's readout got: the last element of its
// packets in each numbering space, the space of its latest packet, and
// when that came.
type sourceSeen struct {
	last   map[UnitKey]uint64
	latest UnitKey
	at     time.Time
}

// RU tracks what an RU holds and for whom: packets from its readout,
// assignments (push: announced by the EM; pull: requested by BUs), the
// data each assignment gets sent, and releases. A packet is freed once
// every element of it was assigned and every assignment holding it was
// released at the run's policy (an overlap packet serves two assignments:
// its release is reference-counted). A reassignment takes over the
// holdings of the assignment it supersedes and is sent again, to its new
// BU. Pure state machine like EM: drive it, read Outputs.
type RU struct {
	cfg     RUConfig
	clock   Clock
	sources map[uint32]bool
	// held[key][source]: packets sorted by First.
	held    map[UnitKey]map[uint32][]*ruPacket
	assigns map[uint64]*ruAssign
	// byUnit finds the live assignment of a unit: the EM never gives the
	// same elements to two live assignments, so a new one with the same
	// elements replaces it, even when the RU never heard of the id it
	// names as superseded (pull: a BU that died before requesting).
	byUnit  map[unitSig]*ruAssign
	pending []*ruAssign // not sent yet, oldest first
	kept    []ruKept    // releases applied lately, oldest first
	// done[key]: the elements of released assignments. The EM gives
	// elements out once (a returned assignment is not released), so a
	// packet arriving for them later — a readout behind the others, whose
	// data the BUs built without — is late and freed at once; without
	// this it was held for the rest of the run and the node never
	// finished a stopped run.
	done map[UnitKey]*rangeSet
	// named[key]: the elements this RU's trigger-source packets named
	// (Names), until it stopped naming in that space (quiet); ended[key]:
	// a space's End, the only elements any assignment can hold.
	named map[UnitKey]*rangeSet
	quiet map[UnitKey]bool
	ended map[UnitKey]*rangeSet
	// seen[source]: how far each source's readout got (BehindWait);
	// readoutEnded: this node's readout ended, its sources send nothing
	// more.
	seen         map[uint32]*sourceSeen
	readoutEnded bool
	stats        RUStats
	out          []RUOutput
}

// NewRU returns an RU tracker.
func NewRU(cfg RUConfig, clock Clock) (*RU, error) {
	if len(cfg.Sources) == 0 {
		return nil, fmt.Errorf("ru: no source")
	}
	if cfg.Release < OutcomeReceived || cfg.Release > OutcomeDurable {
		return nil, fmt.Errorf("ru: release policy %v: want received, decided or durable", cfg.Release)
	}
	r := &RU{cfg: cfg, clock: clock, sources: map[uint32]bool{}, held: map[UnitKey]map[uint32][]*ruPacket{},
		assigns: map[uint64]*ruAssign{}, byUnit: map[unitSig]*ruAssign{}, done: map[UnitKey]*rangeSet{},
		named: map[UnitKey]*rangeSet{}, quiet: map[UnitKey]bool{}, ended: map[UnitKey]*rangeSet{},
		seen: map[uint32]*sourceSeen{}}
	now := clock.Now()
	for _, s := range cfg.Sources {
		r.sources[s] = true
		r.seen[s] = &sourceSeen{last: map[UnitKey]uint64{}, at: now}
	}
	r.stats.Missing = map[uint32]uint64{}
	r.stats.NeverAnnounced = map[uint32]uint64{}
	r.stats.BytesPerBU = map[string]int64{}
	return r, nil
}

// Outputs returns what the RU wants done since the last call (reused by
// the next input).
func (r *RU) Outputs() []RUOutput {
	o := r.out
	r.out = r.out[:0]
	return o
}

// NeverAnnouncedTotal is NeverAnnounced summed over the sources.
func (s RUStats) NeverAnnouncedTotal() uint64 {
	var n uint64
	for _, v := range s.NeverAnnounced {
		n += v
	}
	return n
}

// Stats returns the tracker's counters.
func (r *RU) Stats() RUStats {
	s := r.stats
	s.Pending = len(r.pending)
	s.Sent = 0
	for _, a := range r.assigns {
		if a.sent {
			s.Sent++
		}
	}
	s.Missing = maps.Clone(r.stats.Missing)
	s.NeverAnnounced = maps.Clone(r.stats.NeverAnnounced)
	s.BytesPerBU = make(map[string]int64, len(r.stats.BytesPerBU))
	for k, v := range r.stats.BytesPerBU {
		if v != 0 {
			s.BytesPerBU[k] = v
		}
	}
	return s
}

// Add takes a packet from the readout. A packet of a source this RU does
// not read out, or overlapping a held packet of the same source, is
// refused (the caller releases it; the second case is counted).
func (r *RU) Add(p *Packet) error {
	if !r.sources[p.Source] {
		return fmt.Errorf("ru: packet of source %d, which this RU does not read out", p.Source)
	}
	if p.N == 0 {
		return fmt.Errorf("ru: empty packet of source %d", p.Source)
	}
	bySource := r.held[p.Key]
	if bySource == nil {
		bySource = map[uint32][]*ruPacket{}
		r.held[p.Key] = bySource
	}
	list := bySource[p.Source]
	last := p.First + uint64(p.N) - 1
	i := sort.Search(len(list), func(i int) bool { return list[i].p.First > p.First })
	if (i > 0 && list[i-1].p.First+uint64(list[i-1].p.N) > p.First) || (i < len(list) && list[i].p.First <= last) {
		r.stats.Duplicate++
		return fmt.Errorf("ru: packet of source %d for %d-%d overlaps one held", p.Source, p.First, last)
	}
	if sn := r.seen[p.Source]; sn != nil {
		sn.at, sn.latest = r.clock.Now(), p.Key
		if l, ok := sn.last[p.Key]; !ok || last > l {
			sn.last[p.Key] = last
		}
	}
	rp := &ruPacket{p: p}
	list = append(list, nil)
	copy(list[i+1:], list[i:])
	list[i] = rp
	bySource[p.Source] = list
	r.stats.Held++
	r.stats.HeldBytes += int64(p.Bytes)
	// Assignments already sent or released cannot take it: it came too
	// late for them (they went without it, counted missing by source).
	late := false
	for _, a := range r.assigns {
		if a.sent && KeyOf(a.a.Unit) == p.Key && unitOverlap(a.a.Unit, p.First, last) > 0 {
			rp.assigned += unitOverlap(a.a.Unit, p.First, last)
			late = true
		}
	}
	if d := r.done[p.Key]; d != nil {
		if n := d.overlap(p.First, last); n > 0 {
			rp.assigned += n
			late = true
		}
	}
	if late {
		r.stats.Late++
	}
	if e := r.ended[p.Key]; e != nil {
		r.unnamed(rp, e)
	} else if r.cfg.Names && p.Source == r.cfg.TriggerSource && !r.quiet[p.Key] {
		nm := r.named[p.Key]
		if nm == nil {
			nm = &rangeSet{}
			r.named[p.Key] = nm
		}
		nm.add(p.First, last)
	}
	var hit []*ruAssign
	for _, a := range r.pending {
		if KeyOf(a.a.Unit) == p.Key {
			if n := unitOverlap(a.a.Unit, p.First, last); n > 0 {
				rp.assigned += n
				r.attach(a, rp)
				hit = append(hit, a)
			}
		}
	}
	r.sendComplete(hit)
	r.maybeFree(rp)
	return nil
}

// sendComplete sends those of hit (pending assignments a packet came for)
// whose data is now complete; those whose wait ends go at the next Tick.
func (r *RU) sendComplete(hit []*ruAssign) {
	n := 0
	for _, a := range hit {
		if r.missing(a) == nil {
			r.send(a, nil)
			n++
		}
	}
	if n > 0 {
		r.pending = slices.DeleteFunc(r.pending, func(a *ruAssign) bool { return a.sent })
	}
}

// unitOverlap counts u's elements in [lo, hi].
func unitOverlap(u Unit, lo, hi uint64) uint64 {
	var n uint64
	for _, rg := range u.Ranges {
		a, b := max(rg.First, lo), min(rg.Last(), hi)
		if a <= b {
			n += b - a + 1
		}
	}
	return n
}

// Assign takes an assignment (push: the EM's announcement; pull: a BU's
// request, converted with Assign(q)). Announcing the same id again is a
// no-op (a new EM repeating what reached only some RUs).
func (r *RU) Assign(a Assign) {
	if _, ok := r.assigns[a.ID]; ok {
		return
	}
	ra := &ruAssign{a: a, since: r.clock.Now()}
	old := r.assigns[a.Supersedes]
	if old == nil || a.Supersedes == 0 {
		old = r.byUnit[sigOf(a.Unit)]
	}
	if old != nil && reflect.DeepEqual(old.a.Unit, a.Unit) {
		// Take over the old assignment's holdings: same elements, new BU.
		ra.packets, ra.bytes = old.packets, old.bytes
		for _, rp := range ra.packets {
			for i, u := range rp.users {
				if u == old {
					rp.users[i] = ra
				}
			}
		}
		r.forget(old)
	} else {
		packets := r.overlapping(a.Unit)
		// An older EM's assignment of some of these elements is void: the
		// EM that took over assigned them anew (it never heard of it).
		var void []*ruAssign
		for _, rp := range packets {
			for _, u := range rp.users {
				if u.a.Epoch < a.Epoch && unitsOverlap(u.a.Unit, a.Unit) && !slices.Contains(void, u) {
					void = append(void, u)
				}
			}
		}
		// Attach first: voiding must not free a packet the new one needs.
		for _, rp := range packets {
			rp.assigned += unitOverlap(a.Unit, rp.p.First, rp.p.First+uint64(rp.p.N)-1)
			r.attach(ra, rp)
		}
		for _, u := range void {
			r.stats.Voided++
			r.forget(u)
			r.detach(u, false)
		}
	}
	r.assigns[a.ID] = ra
	r.byUnit[sigOf(a.Unit)] = ra
	r.pending = append(r.pending, ra)
	r.trySend(false)
}

// forget drops an assignment's record without touching its packets'
// references (they moved to its successor).
func (r *RU) forget(a *ruAssign) {
	delete(r.assigns, a.a.ID)
	if r.byUnit[sigOf(a.a.Unit)] == a {
		delete(r.byUnit, sigOf(a.a.Unit))
	}
	if a.sent {
		r.stats.BytesPerBU[a.a.BU] -= a.bytes
	}
	for i, p := range r.pending {
		if p == a {
			r.pending = append(r.pending[:i], r.pending[i+1:]...)
			break
		}
	}
}

// covered reports, for each source, the elements of a's unit that a's
// packets hold.
func (r *RU) missing(a *ruAssign) map[uint32]uint64 {
	want := uint64(a.a.Unit.Len())
	have := map[uint32]uint64{}
	for _, rp := range a.packets {
		have[rp.p.Source] += unitOverlap(a.a.Unit, rp.p.First, rp.p.First+uint64(rp.p.N)-1)
	}
	var miss map[uint32]uint64
	for s := range r.sources {
		if have[s] < want {
			if miss == nil {
				miss = map[uint32]uint64{}
			}
			miss[s] = want - have[s]
		}
	}
	return miss
}

// trySend sends pending assignments whose data is complete, or whose wait
// is over (or all, when force).
func (r *RU) trySend(force bool) {
	now := r.clock.Now()
	kept := r.pending[:0]
	for _, a := range r.pending {
		miss := r.missing(a)
		if miss != nil && !force && (now.Sub(a.since) < r.cfg.Wait || r.behind(a, miss, now)) {
			kept = append(kept, a)
			continue
		}
		r.send(a, miss)
	}
	for i := len(kept); i < len(r.pending); i++ {
		r.pending[i] = nil
	}
	r.pending = kept
}

// behind reports whether a, past its Wait, waits on for a source in miss
// that is behind it and still sending (RUConfig.BehindWait), within
// BehindLimit of its assignment.
func (r *RU) behind(a *ruAssign, miss map[uint32]uint64, now time.Time) bool {
	if r.cfg.BehindWait <= 0 || r.readoutEnded || now.Sub(a.since) >= r.cfg.BehindLimit {
		return false
	}
	key, end := KeyOf(a.a.Unit), a.a.Unit.Ranges[len(a.a.Unit.Ranges)-1].Last()
	for s := range miss {
		sn := r.seen[s]
		if now.Sub(sn.at) >= r.cfg.BehindWait {
			continue // paused too long: taken for stopped
		}
		if l, ok := sn.last[key]; ok && l >= end {
			continue // past the assignment: what it lacks is not coming
		}
		if len(sn.last) > 0 && sn.latest != key {
			continue // it sends in another space (a counter reset): past this one
		}
		if !a.waited {
			a.waited = true
			r.stats.WaitedBehind++
		}
		return true
	}
	return false
}

// ReadoutEnded tells the RU that this node's readout ended: its sources
// send nothing more, so no assignment waits for one behind it
// (RUConfig.BehindWait); those waiting go now.
func (r *RU) ReadoutEnded() {
	r.readoutEnded = true
	r.trySend(false)
}

func (r *RU) send(a *ruAssign, miss map[uint32]uint64) {
	a.sent = true
	sort.Slice(a.packets, func(i, j int) bool {
		x, y := a.packets[i].p, a.packets[j].p
		if x.Source != y.Source {
			return x.Source < y.Source
		}
		return x.First < y.First
	})
	h := DataHeader{Assignment: a.a.ID, Incarnation: a.a.Incarnation, PayloadBytes: uint64(a.bytes),
		Group: GroupMixed, Packets: uint32(len(a.packets)), Flags: DataFinal}
	if miss != nil {
		h.Flags |= DataMissing
		for s, n := range miss {
			r.stats.Missing[s] += n
		}
	}
	r.stats.BytesPerBU[a.a.BU] += a.bytes
	ps := make([]*Packet, len(a.packets))
	for i, rp := range a.packets {
		ps[i] = rp.p
	}
	r.out = append(r.out, RUOutput{Kind: RUSend, BU: a.a.BU, Header: h, Packets: ps})
}

// Release takes a release the EM relayed (Output OutRelease: RUs free
// only what the EM accepted). Entries at or past the run's policy free
// the assignment's hold on its packets; entries of assignments this RU
// does not know for that BU incarnation are counted stale. Returned
// assignments stay held: the EM reassigns them (Assign with Supersedes).
func (r *RU) Release(rel Release) {
	for _, e := range rel.Entries {
		a := r.assigns[e.Assignment]
		if a == nil || a.a.BU != rel.BU || a.a.Incarnation != rel.Incarnation {
			r.stats.Stale++
			continue
		}
		if e.Outcome == OutcomeReturned || e.Outcome < r.cfg.Release {
			continue
		}
		r.forget(a)
		r.detach(a, true)
		d := r.done[KeyOf(a.a.Unit)]
		if d == nil {
			d = &rangeSet{}
			r.done[KeyOf(a.a.Unit)] = d
		}
		for _, rg := range a.a.Unit.Ranges {
			d.add(rg.First, rg.Last())
		}
		r.kept = append(r.kept, ruKept{InventoryEntry{ID: a.a.ID, Supersedes: a.a.Supersedes, Epoch: a.a.Epoch,
			Incarnation: a.a.Incarnation, BU: a.a.BU, Reached: e.Outcome, Unit: a.a.Unit}, r.clock.Now()})
	}
}

// Inventory is what this RU (node, incarnation inc) tells a new EM of
// epoch: the releases it applied within Retain, then the assignments it
// holds unreleased (reached 0), by id: the new EM relays a release for
// those whose elements its inherited ledger has done (the old EM may have
// died before relaying it), the others it ignores.
func (r *RU) Inventory(epoch uint64, node string, inc uint64) Inventory {
	inv := Inventory{Epoch: epoch, Incarnation: inc, Node: node}
	for _, k := range r.kept {
		inv.Entries = append(inv.Entries, k.e)
	}
	ids := make([]uint64, 0, len(r.assigns))
	for id := range r.assigns {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		a := r.assigns[id].a
		inv.Entries = append(inv.Entries, InventoryEntry{ID: a.ID, Supersedes: a.Supersedes, Epoch: a.Epoch,
			Incarnation: a.Incarnation, BU: a.BU, Unit: a.Unit})
	}
	return inv
}

// overlapping lists the held packets with elements of u (each once).
func (r *RU) overlapping(u Unit) []*ruPacket {
	var out []*ruPacket
	for _, list := range r.held[KeyOf(u)] {
		for _, rg := range u.Ranges {
			lo, hi := rg.First, rg.Last()
			i := sort.Search(len(list), func(i int) bool { return list[i].p.First+uint64(list[i].p.N)-1 >= lo })
			for ; i < len(list) && list[i].p.First <= hi; i++ {
				if n := len(out); n > 0 && out[n-1] == list[i] {
					continue // one packet spanning two ranges of the unit
				}
				out = append(out, list[i])
			}
		}
	}
	return out
}

func unitsOverlap(a, b Unit) bool {
	if KeyOf(a) != KeyOf(b) {
		return false
	}
	for _, r := range a.Ranges {
		if unitOverlap(b, r.First, r.Last()) > 0 {
			return true
		}
	}
	return false
}

// attach makes a hold rp.
func (r *RU) attach(a *ruAssign, rp *ruPacket) {
	rp.refs++
	rp.users = append(rp.users, a)
	a.packets = append(a.packets, rp)
	a.bytes += int64(rp.p.Bytes)
}

// detach drops a's hold on its packets; released: its BU released it
// (its elements will not be needed again), else it was voided.
func (r *RU) detach(a *ruAssign, released bool) {
	for _, rp := range a.packets {
		rp.refs--
		for i, u := range rp.users {
			if u == a {
				rp.users = append(rp.users[:i], rp.users[i+1:]...)
				break
			}
		}
		if released {
			for _, rg := range a.a.Unit.Ranges {
				lo, hi := max(rg.First, rp.p.First), min(rg.Last(), rp.p.First+uint64(rp.p.N)-1)
				if lo <= hi {
					rp.released.add(lo, hi)
				}
			}
		} else {
			rp.assigned -= min(rp.assigned, unitOverlap(a.a.Unit, rp.p.First, rp.p.First+uint64(rp.p.N)-1))
		}
		r.maybeFree(rp)
	}
}

// Unassigned lists the elements of source's held packets that no released
// assignment covered: what the RU holding the trigger source announces
// again to a new EM (which subtracts what the BUs still hold).
func (r *RU) Unassigned(source uint32) []Unit {
	var out []Unit
	keys := make([]UnitKey, 0, len(r.held))
	for k := range r.held {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		x, y := keys[i], keys[j]
		if x.Run != y.Run {
			return x.Run < y.Run
		}
		if x.Resync != y.Resync {
			return x.Resync < y.Resync
		}
		return x.Kind < y.Kind
	})
	for _, k := range keys {
		u := Unit{Run: k.Run, Resync: k.Resync, Kind: k.Kind}
		for _, rp := range r.held[k][source] {
			rp.released.gaps(rp.p.First, rp.p.First+uint64(rp.p.N)-1, func(lo, hi uint64) {
				u.Ranges = appendRanges(u.Ranges, []Range{{First: lo, N: uint32(hi - lo + 1)}})
			})
		}
		if len(u.Ranges) > 0 {
			out = append(out, u)
		}
	}
	return out
}

// maybeFree frees a packet no assignment holds and none can still need.
func (r *RU) maybeFree(rp *ruPacket) {
	if rp.refs > 0 || rp.assigned < uint64(rp.p.N) {
		return
	}
	r.free(rp)
}

func (r *RU) free(rp *ruPacket) {
	bySource := r.held[rp.p.Key]
	list := bySource[rp.p.Source]
	i := sort.Search(len(list), func(i int) bool { return list[i].p.First >= rp.p.First })
	if i == len(list) || list[i] != rp {
		return // already freed
	}
	bySource[rp.p.Source] = append(list[:i], list[i+1:]...)
	r.stats.Held--
	r.stats.HeldBytes -= int64(rp.p.Bytes)
	r.stats.Freed++
	r.out = append(r.out, RUOutput{Kind: RUFree, Packet: rp.p})
}

// Tick sends assignments whose wait for missing data is over and forgets
// releases older than Retain.
func (r *RU) Tick() {
	r.trySend(false)
	retain := r.cfg.Retain
	if retain == 0 {
		retain = 10 * time.Second
	}
	now := r.clock.Now()
	i := 0
	for i < len(r.kept) && now.Sub(r.kept[i].at) >= retain {
		i++
	}
	r.kept = r.kept[i:]
}

// Names reports whether a packet of key (of the trigger source) names
// its elements: not once this RU ended the space (EndOf) or got its End.
func (r *RU) Names(key UnitKey) bool { return !r.quiet[key] && r.ended[key] == nil }

// EndOf is this RU's End of the space of key (Names): the elements its
// trigger-source packets named. From now on it names nothing in that
// space; the caller sends the End to every RU, this one included.
func (r *RU) EndOf(key UnitKey) End {
	e := End{Key: key}
	if nm := r.named[key]; nm != nil {
		for _, sp := range nm.r {
			e.Named = append(e.Named, Span{First: sp.lo, Last: sp.hi})
		}
	}
	r.quiet[key] = true
	return e
}

// End applies the End of a space (from the RU holding the trigger
// source): the held packets' elements it did not name can be in no
// assignment, so they count as never announced, and a packet left with
// none an assignment may still need is freed. Later packets of the space
// are treated the same on arrival. A repeated End is ignored.
func (r *RU) End(e End) {
	if r.ended[e.Key] != nil {
		return
	}
	set := &rangeSet{}
	for _, sp := range e.Named {
		set.add(sp.First, sp.Last)
	}
	r.ended[e.Key] = set
	var check []*ruPacket
	for _, list := range r.held[e.Key] {
		for _, rp := range list {
			r.unnamed(rp, set)
			check = append(check, rp)
		}
	}
	for _, rp := range check {
		r.maybeFree(rp)
	}
}

// unnamed counts the elements of rp that set (an End's named elements)
// lacks as never announced: no assignment will cover them.
func (r *RU) unnamed(rp *ruPacket, set *rangeSet) {
	last := rp.p.First + uint64(rp.p.N) - 1
	if out := uint64(rp.p.N) - set.overlap(rp.p.First, last); out > 0 {
		rp.assigned += out
		r.stats.NeverAnnounced[rp.p.Source] += out
	}
}

// Stop ends the run: pending assignments go as they are, and every packet
// no sent assignment holds is freed (elements never assigned: the EM
// counts them lost when it stops).
func (r *RU) Stop() {
	r.trySend(true)
	for _, bySource := range r.held {
		for _, list := range bySource {
			for _, rp := range append([]*ruPacket(nil), list...) {
				if rp.refs == 0 {
					r.free(rp)
				}
			}
		}
	}
}
