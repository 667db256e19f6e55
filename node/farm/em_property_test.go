package farm

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The EM's property test: a simulated farm of BUs that join, die (told to
// the EM at once or later, as heartbeats would), come back as new
// incarnations, send credits of stale epochs and releases from dead
// incarnations, and release their work in random order. After every step
// no element is in two live assignments; at the end, with the run flushed
// and every surviving BU releasing what it holds, every announced element
// was built exactly once by a live incarnation or (policy received only)
// lost with its reason, the EM's ledger agrees with the simulation's own,
// and every ignored message was counted.

type simBU struct {
	id       string
	inc      uint64
	alive    bool // the process runs
	declared bool // the EM was told it is dead
	held     map[uint64]Assign
	received map[uint64]bool // reported received (policy received)
}

type sim struct {
	t      *testing.T
	rng    *rand.Rand
	cfg    EMConfig
	clk    *fakeClock
	m      *EM
	bus    map[string]*simBU
	dead   []*simBU // declared dead incarnations (zombies may still talk)
	inc    uint64
	nBU    int
	epoch  uint64
	ids    map[uint64]bool // every assignment id seen
	live   map[uint64]Assign
	undec  map[uint64]Assign // released at policy received, not decided
	built  map[ledgerKey]*rangeSet
	nBuilt uint64
	lost   uint64
	annSet map[ledgerKey]*rangeSet
	nAnn   uint64
	// what the EM must have counted
	stale, staleEpoch         uint64
	notYours, staleAssignment uint64
	settled                   []Assign // assignments built, for repeated releases
	relayed                   map[uint64]bool
	// id reservation
	reservePending bool
	reservedEnd    uint64
	// announcement cursor
	resync uint32
	cursor uint64
}

func newSim(t *testing.T, seed uint64, cfg EMConfig) *sim {
	s := &sim{t: t, rng: rand.New(rand.NewPCG(seed, 99)), cfg: cfg, clk: newClock(), bus: map[string]*simBU{},
		ids: map[uint64]bool{}, relayed: map[uint64]bool{}, live: map[uint64]Assign{}, undec: map[uint64]Assign{},
		built: map[ledgerKey]*rangeSet{}, annSet: map[ledgerKey]*rangeSet{}, epoch: 1000 + seed, reservedEnd: 1}
	m, err := NewEM(cfg, s.epoch, s.clk)
	if err != nil {
		t.Fatal(err)
	}
	s.m = m
	s.deliver()
	for i := 0; i < 3; i++ {
		s.newBU()
	}
	return s
}

func (s *sim) fail(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf(format, args...)
}

func setOf(m map[ledgerKey]*rangeSet, u Unit) *rangeSet {
	k := ledgerKey{u.Run, u.Resync, u.Kind}
	if m[k] == nil {
		m[k] = &rangeSet{}
	}
	return m[k]
}

func (s *sim) newBU() {
	s.nBU++
	s.inc++
	b := &simBU{id: fmt.Sprintf("bu%d", s.nBU), inc: s.inc, alive: true, held: map[uint64]Assign{}, received: map[uint64]bool{}}
	s.bus[b.id] = b
	s.m.Join(b.id, b.inc)
	s.deliver()
}

// deliver takes the EM's outputs: assignments reach their BU if its
// process runs (else they are lost with it, until the EM learns it died).
func (s *sim) deliver() {
	for _, o := range s.m.Outputs() {
		switch o.Kind {
		case OutReserve:
			if s.reservePending {
				s.fail("a second reserve request while one is pending")
			}
			s.reservePending = true
		case OutRelease:
			// The RUs may free these bytes: each assignment once, only
			// when the simulation's BU released it at the policy, never
			// while it is live (it could still be reassigned).
			for _, e := range o.Release.Entries {
				if s.relayed[e.Assignment] || e.Outcome < s.cfg.Release || e.Outcome == OutcomeReturned {
					s.fail("relayed %+v: twice, or below policy %v", e, s.cfg.Release)
				}
				if _, ok := s.live[e.Assignment]; ok {
					s.fail("relayed the release of %d, which is still live", e.Assignment)
				}
				s.relayed[e.Assignment] = true
			}
		case OutAssign:
			a := o.Assign
			if s.ids[a.ID] || a.ID >= s.reservedEnd || a.Epoch != s.epoch {
				s.fail("assignment %+v: id reused, unreserved (end %d) or wrong epoch", a, s.reservedEnd)
			}
			if o.ToRUs != (s.cfg.Protocol == Push) {
				s.fail("assignment announced to RUs: %v in %v", o.ToRUs, s.cfg.Protocol)
			}
			if a.Supersedes != 0 {
				if !s.ids[a.Supersedes] {
					s.fail("assignment %d supersedes unknown %d", a.ID, a.Supersedes)
				}
				if _, ok := s.live[a.Supersedes]; ok {
					s.fail("assignment %d supersedes %d, which is still live", a.ID, a.Supersedes)
				}
			}
			s.ids[a.ID] = true
			b := s.bus[a.BU]
			if b == nil || b.inc != a.Incarnation || b.declared {
				s.fail("assignment %+v to a BU the EM was told is gone", a)
			}
			s.live[a.ID] = a
			if b.alive {
				b.held[a.ID] = a
			}
		}
	}
	s.check()
}

// check: no element in two live assignments (or in a live one and an
// undecided one); pull BUs within MaxOutstanding; ignored messages counted.
func (s *sim) check() {
	s.t.Helper()
	seen := map[ledgerKey]*rangeSet{}
	perBU := map[string]int{}
	for _, set := range []map[uint64]Assign{s.live, s.undec} {
		for _, a := range set {
			for _, r := range a.Unit.Ranges {
				if o := setOf(seen, a.Unit).add(r.First, r.Last()); o > 0 {
					s.fail("%d elements of %s in two live assignments", o, a.Unit)
				}
			}
		}
	}
	for _, a := range s.live {
		perBU[a.BU]++
	}
	if s.cfg.Protocol == Pull {
		for bu, n := range perBU {
			if n > s.cfg.MaxOutstanding {
				s.fail("BU %s has %d outstanding, max %d", bu, n, s.cfg.MaxOutstanding)
			}
		}
	}
	st := s.m.Stats()
	if st.NotYours != s.notYours || st.StaleAssignment != s.staleAssignment {
		s.fail("EM counted not-yours %d, stale assignment %d; sent %d and %d", st.NotYours, st.StaleAssignment, s.notYours, s.staleAssignment)
	}
	if st.StaleIncarnation+st.UnknownBU != s.stale || st.StaleEpoch != s.staleEpoch {
		s.fail("EM counted stale incarnation %d + unknown %d, stale epoch %d; sent %d and %d",
			st.StaleIncarnation, st.UnknownBU, st.StaleEpoch, s.stale, s.staleEpoch)
	}
}

func (s *sim) aliveBUs() []*simBU {
	var out []*simBU
	for _, b := range s.bus {
		if b.alive && !b.declared {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(x, y *simBU) int { return int(x.inc) - int(y.inc) })
	return out
}

func (s *sim) pickAlive() *simBU {
	bs := s.aliveBUs()
	if len(bs) == 0 {
		return nil
	}
	return bs[s.rng.IntN(len(bs))]
}

func (s *sim) announce() {
	if s.rng.IntN(20) == 0 {
		s.resync++
		s.cursor = s.rng.Uint64N(5) // counters reset: ids start low again
	}
	u := Unit{Run: 1, Resync: s.resync, Kind: UnitEvents}
	n := 1 + s.rng.IntN(2*s.cfg.AssignmentSize)
	for n > 0 {
		s.cursor += s.rng.Uint64N(3) // sparse ids
		k := 1 + s.rng.IntN(n)
		u.Ranges = appendRanges(u.Ranges, []Range{{First: s.cursor, N: uint32(k)}})
		s.cursor += uint64(k)
		n -= k
	}
	for _, r := range u.Ranges {
		setOf(s.annSet, u).add(r.First, r.Last())
	}
	s.nAnn += uint64(u.Len())
	if err := s.m.Announce(u); err != nil {
		s.fail("announce %v: %v", u, err)
	}
	s.deliver()
}

func (s *sim) credit() {
	b := s.pickAlive()
	if b == nil {
		return
	}
	c := Credit{Epoch: s.epoch, Incarnation: b.inc, BU: b.id, Events: uint32((1 + s.rng.IntN(3)) * s.cfg.AssignmentSize), Bytes: 1 << 40}
	if s.rng.IntN(20) == 0 {
		c.Epoch--
		s.staleEpoch++
	}
	s.m.Credit(c)
	s.deliver()
}

func (s *sim) release(b *simBU, all bool) {
	ids := make([]uint64, 0, len(b.held))
	for id := range b.held {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	s.rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	if !all && len(ids) > 3 {
		ids = ids[:1+s.rng.IntN(3)]
	}
	if len(ids) == 0 {
		return
	}
	rel := Release{Incarnation: b.inc, BU: b.id}
	for _, id := range ids {
		a := b.held[id]
		e := ReleaseEntry{Assignment: id, Outcome: OutcomeDecided, Events: uint32(a.Unit.Len()), Bytes: uint64(a.Unit.Len()) * 100}
		switch {
		case !all && s.rng.IntN(20) == 0 && !b.received[id]:
			e.Outcome = OutcomeReturned
			delete(s.live, id)
			delete(b.held, id)
		case s.cfg.Release == OutcomeReceived && !b.received[id]:
			e.Outcome = OutcomeReceived
			b.received[id] = true
			delete(s.live, id)
			s.undec[id] = a
		default:
			if s.cfg.Release == OutcomeDurable || s.rng.IntN(2) == 0 {
				e.Outcome = OutcomeDurable
			}
			if _, ok := s.live[id]; !ok {
				if _, ok := s.undec[id]; !ok {
					s.fail("BU %s releases %d, which is neither live nor undecided", b.id, id)
				}
			}
			delete(s.live, id)
			delete(s.undec, id)
			delete(b.held, id)
			for _, r := range a.Unit.Ranges {
				if o := setOf(s.built, a.Unit).add(r.First, r.Last()); o > 0 {
					s.fail("%d elements of %s built twice", o, a.Unit)
				}
			}
			s.nBuilt += uint64(a.Unit.Len())
			s.settled = append(s.settled, a)
		}
		rel.Entries = append(rel.Entries, e)
	}
	s.m.Release(rel)
	s.deliver()
}

// declare tells the EM that b's incarnation is dead: its live work must
// be reassigned, what it released undecided is lost.
func (s *sim) declare(b *simBU) {
	b.declared = true
	for id, a := range s.live {
		if a.BU == b.id && a.Incarnation == b.inc {
			delete(s.live, id)
		}
	}
	for id, a := range s.undec {
		if a.BU == b.id && a.Incarnation == b.inc {
			delete(s.undec, id)
			s.lost += uint64(a.Unit.Len())
		}
	}
	s.dead = append(s.dead, &simBU{id: b.id, inc: b.inc, held: b.held})
	s.m.Dead(b.id, b.inc)
	s.deliver()
}

func (s *sim) kill() {
	b := s.pickAlive()
	if b == nil || len(s.aliveBUs()) == 1 && s.rng.IntN(4) != 0 {
		return
	}
	b.alive = false
	if s.rng.IntN(10) < 7 {
		s.declare(b)
	}
}

// rejoin brings a BU back as a new incarnation: a declared-dead one, or a
// crashed one the EM has not noticed (the new membership record says so).
func (s *sim) rejoin() {
	var cands []*simBU
	for _, b := range s.bus {
		if !b.alive || b.declared {
			cands = append(cands, b)
		}
	}
	if len(cands) == 0 {
		return
	}
	slices.SortFunc(cands, func(x, y *simBU) int { return int(x.inc) - int(y.inc) })
	b := cands[s.rng.IntN(len(cands))]
	if !b.declared {
		// The EM learns of the death from the new incarnation's Join.
		b.declared = true
		for id, a := range s.live {
			if a.BU == b.id && a.Incarnation == b.inc {
				delete(s.live, id)
			}
		}
		for id, a := range s.undec {
			if a.BU == b.id && a.Incarnation == b.inc {
				delete(s.undec, id)
				s.lost += uint64(a.Unit.Len())
			}
		}
		s.dead = append(s.dead, &simBU{id: b.id, inc: b.inc, held: b.held})
	}
	s.inc++
	nb := &simBU{id: b.id, inc: s.inc, alive: true, held: map[uint64]Assign{}, received: map[uint64]bool{}}
	s.bus[b.id] = nb
	s.m.Join(nb.id, nb.inc)
	s.deliver()
}

// zombie: a dead incarnation (SIGSTOP'd and resumed) sends a release of
// its old work or a credit; the EM must ignore and count it.
func (s *sim) zombie() {
	if len(s.dead) == 0 {
		return
	}
	z := s.dead[s.rng.IntN(len(s.dead))]
	s.stale++
	if len(z.held) == 0 || s.rng.IntN(2) == 0 {
		s.m.Credit(Credit{Epoch: s.epoch, Incarnation: z.inc, BU: z.id, Events: 100})
	} else {
		var id uint64
		for id = range z.held {
			break
		}
		s.m.Release(Release{Incarnation: z.inc, BU: z.id, Entries: []ReleaseEntry{{Assignment: id, Outcome: OutcomeDecided}}})
	}
	s.deliver()
}

// confused: a live BU releases another live BU's assignment, or repeats
// the release of one already built; the EM must ignore and count it.
func (s *sim) confused() {
	b := s.pickAlive()
	if b == nil {
		return
	}
	if len(s.settled) > 0 && s.rng.IntN(2) == 0 {
		a := s.settled[s.rng.IntN(len(s.settled))]
		s.staleAssignment++
		s.m.Release(Release{Incarnation: b.inc, BU: b.id, Entries: []ReleaseEntry{{Assignment: a.ID, Outcome: OutcomeDecided}}})
		s.deliver()
		return
	}
	ids := make([]uint64, 0, len(s.live))
	for id, a := range s.live {
		if a.BU != b.id {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	slices.Sort(ids)
	s.notYours++
	s.m.Release(Release{Incarnation: b.inc, BU: b.id, Entries: []ReleaseEntry{{Assignment: ids[s.rng.IntN(len(ids))], Outcome: OutcomeDecided}}})
	s.deliver()
}

func (s *sim) grantIDs() {
	if !s.reservePending {
		return
	}
	s.reservePending = false
	first := s.reservedEnd + s.rng.Uint64N(3) // blocks need not be contiguous
	s.reservedEnd = first + s.cfg.BlockSize
	if err := s.m.Reserved(Block{First: first, End: s.reservedEnd}); err != nil {
		s.fail("reserved: %v", err)
	}
	s.deliver()
}

func (s *sim) step() {
	switch x := s.rng.IntN(100); {
	case x < 20:
		s.announce()
	case x < 40:
		s.credit()
	case x < 62:
		if b := s.pickAlive(); b != nil {
			s.release(b, false)
		}
	case x < 66:
		s.kill()
	case x < 70:
		for _, b := range s.bus {
			if !b.alive && !b.declared {
				s.declare(b)
				break
			}
		}
	case x < 74:
		s.zombie()
	case x < 78:
		s.rejoin()
	case x < 80:
		if len(s.bus) < 8 {
			s.newBU()
		}
	case x < 82:
		s.confused()
	case x < 90:
		s.clk.advance(time.Duration(s.rng.IntN(3)) * time.Millisecond)
		s.m.Tick()
		s.deliver()
	default:
		s.grantIDs()
	}
}

// finish: the dead are declared, survivors get credit and release
// everything until nothing is open; then the ledgers must agree.
func (s *sim) finish() {
	for _, b := range s.bus {
		if !b.alive && !b.declared {
			s.declare(b)
		}
	}
	if len(s.aliveBUs()) == 0 {
		s.newBU()
	}
	s.m.Flush()
	s.deliver()
	for round := 0; ; round++ {
		st := s.m.Stats()
		if st.Queued == 0 && st.Open == 0 && st.Undecided == 0 {
			break
		}
		if round > 10000 {
			s.fail("not drained after %d rounds: %+v", round, st)
		}
		s.grantIDs()
		for _, b := range s.aliveBUs() {
			s.m.Credit(Credit{Epoch: s.epoch, Incarnation: b.inc, BU: b.id, Events: uint32(4 * s.cfg.AssignmentSize), Bytes: 1 << 40})
			s.deliver()
			s.release(b, true)
		}
	}
	l := s.m.Ledger().Summary()
	if !l.Balanced {
		s.fail("ledger not balanced:\n%s", l)
	}
	if l.Announced != s.nAnn || l.Built != s.nBuilt || l.LostTotal() != s.lost || l.Lost[LostBUDeadAfterRelease] != s.lost {
		s.fail("EM ledger %+v; simulation announced %d built %d lost %d", l, s.nAnn, s.nBuilt, s.lost)
	}
	if s.cfg.Release != OutcomeReceived && s.lost != 0 {
		s.fail("lost %d under policy %v", s.lost, s.cfg.Release)
	}
	// Built ∪ lost covers every announced element: compare the sets.
	for k, a := range s.annSet {
		b := s.built[k]
		var nb uint64
		if b != nil {
			nb = b.count
			for _, sp := range b.r {
				if a.overlap(sp.lo, sp.hi) != sp.hi-sp.lo+1 {
					s.fail("built elements %d-%d of %v never announced", sp.lo, sp.hi, k)
				}
			}
		}
		if s.lost == 0 && nb != a.count {
			s.fail("key %v: announced %d, built %d", k, a.count, nb)
		}
	}
	for _, a := range s.settled {
		if !s.relayed[a.ID] {
			s.fail("assignment %d was built but its release never relayed to the RUs", a.ID)
		}
	}
	if len(s.live) != 0 || len(s.undec) != 0 {
		s.fail("simulation still has %d live, %d undecided", len(s.live), len(s.undec))
	}
}

func TestEMProperty(t *testing.T) {
	seeds, steps := 30, 1500
	if testing.Short() {
		seeds = 10
	}
	for _, proto := range []Protocol{Push, Pull} {
		for _, pol := range []Outcome{OutcomeReceived, OutcomeDecided, OutcomeDurable} {
			t.Run(fmt.Sprintf("%v-%v", proto, pol), func(t *testing.T) {
				var reassigned, stale uint64
				for seed := uint64(1); seed <= uint64(seeds); seed++ {
					cfg := EMConfig{Protocol: proto, AssignmentSize: 1 + int(seed%5), Linger: 2 * time.Millisecond,
						MaxOutstanding: 1 + int(seed%3), Release: pol, BlockSize: 8 + seed%16}
					s := newSim(t, seed, cfg)
					for i := 0; i < steps; i++ {
						s.step()
					}
					s.finish()
					st := s.m.Stats()
					reassigned += st.Reassigned
					stale += st.StaleIncarnation
				}
				// The faults happened: the test is not vacuous.
				if reassigned == 0 || stale == 0 {
					t.Fatalf("no reassignment (%d) or stale message (%d) in %d runs", reassigned, stale, seeds)
				}
				t.Logf("%d runs: %d reassignments, %d stale incarnation messages ignored", seeds, reassigned, stale)
			})
		}
	}
}
