package farm

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// LostReason says why announced elements were never built.
type LostReason string

// Reasons of loss. Every loss the farm can have is one of these; none is
// silent.
const (
	// LostRUDead: the RU that held the elements' data died before sending
	// it (and nobody else holds it).
	LostRUDead LostReason = "ru_dead"
	// LostTimedOut: no data for the elements reached the BU within its
	// wait: it built the assignment with no event at all.
	LostTimedOut LostReason = "timed_out"
	// LostBUDeadAfterRelease: the BU died after releasing the elements'
	// data (release policy "received") but before its trigger decided.
	LostBUDeadAfterRelease LostReason = "bu_dead_after_release"
	// LostRunStopped: announced, but the run stopped before they were
	// built.
	LostRunStopped LostReason = "run_stopped"
	// LostUnheld: announced to an earlier EM, open when it died, and at
	// the takeover no BU or RU held them (the RU holding the trigger
	// source did not announce them again, no BU had them in flight).
	LostUnheld LostReason = "unheld_at_takeover"
)

// ledgerKey separates numbering spaces: ids restart with a resync and
// packet sequence numbers are not event ids.
type ledgerKey struct {
	run, resync uint32
	kind        UnitKind
}

type ledgerSets struct {
	announced, built, lost, dup, carried rangeSet
	// Inherit (an EM takeover): inherited are the elements an earlier EM
	// of the run had built or counted lost (done: announcing them again is
	// no violation); open0 those it had announced and not done. open0 is
	// counted announced but is not in announced until the elements are
	// announced again (or counted unheld when the takeover ends).
	inherited, open0 rangeSet
}

// Ledger is the farm ledger of a run: every element (event id, or packet
// sequence number) the RUs announced is built by exactly one BU, or lost
// with a reason, and elements rebuilt after a failover that the dead BU
// had already stored are counted duplicate_after_failover. It keeps sets
// of numbers as ranges, so it checks exactness, not only counts: an
// element built twice, built and lost, or built without being announced
// is counted as a violation and the ledger is not balanced. It spans EM
// takeovers: a new EM Inherits the ledger its predecessor published (its
// sets included) and goes on from there. Not safe for concurrent use (the
// EM that owns it is not either).
type Ledger struct {
	sets       map[ledgerKey]*ledgerSets
	announced  uint64
	built      uint64
	carried    uint64
	lost       map[LostReason]uint64
	lostIDs    map[LostReason][]KeyedRange
	dup        uint64
	dupIDs     []KeyedRange
	perBU      map[string]uint64
	events     uint64 // events the BUs reported building (packets hold several)
	violations []string
	nViolation uint64
}

// KeyedRange is a range of elements of one (run, resync, unit kind).
type KeyedRange struct {
	Run    uint32   `json:"run"`
	Resync uint32   `json:"resync"`
	Kind   UnitKind `json:"kind"`
	First  uint64   `json:"first"`
	N      uint32   `json:"n"`
}

// maxListed caps the id ranges a ledger lists per reason (counts are
// always whole).
const maxListed = 64

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{sets: map[ledgerKey]*ledgerSets{}, lost: map[LostReason]uint64{},
		lostIDs: map[LostReason][]KeyedRange{}, perBU: map[string]uint64{}}
}

func (l *Ledger) setsOf(u Unit) *ledgerSets {
	k := ledgerKey{u.Run, u.Resync, u.Kind}
	s := l.sets[k]
	if s == nil {
		s = &ledgerSets{}
		l.sets[k] = s
	}
	return s
}

// Announced lists the elements announced in key's numbering space
// (inherited ones included), as inclusive spans, ascending: what an End
// names on behalf of a trigger source's RU that is gone.
func (l *Ledger) Announced(key UnitKey) []Span {
	s := l.sets[ledgerKey{key.Run, key.Resync, key.Kind}]
	if s == nil {
		return nil
	}
	// With what an earlier EM announced and did not see done (open0):
	// BUs may hold assignments of those still.
	var all rangeSet
	for _, set := range []*rangeSet{&s.announced, &s.open0} {
		for _, sp := range set.r {
			all.add(sp.lo, sp.hi)
		}
	}
	out := make([]Span, 0, len(all.r))
	for _, sp := range all.r {
		out = append(out, Span{First: sp.lo, Last: sp.hi})
	}
	return out
}

func (l *Ledger) violate(format string, args ...any) {
	l.nViolation++
	if len(l.violations) < maxListed {
		l.violations = append(l.violations, fmt.Sprintf(format, args...))
	}
}

// fresh returns u's elements not announced before, and how many were.
func (l *Ledger) fresh(u Unit) (Unit, uint64) {
	var sets *ledgerSets
	if l.sets != nil {
		sets = l.sets[ledgerKey{u.Run, u.Resync, u.Kind}]
	}
	if sets == nil {
		return u, 0
	}
	rest, _ := subtractUnit(u, &sets.announced)
	return rest, uint64(u.Len() - rest.Len())
}

// Announce records u's elements as announced. Elements announced before
// are a violation (counted, and not announced again), apart from those an
// earlier EM of the run built or counted lost (Inherit): a takeover
// learns them again from inventories.
func (l *Ledger) Announce(u Unit) {
	s := l.setsOf(u)
	for _, r := range u.Ranges {
		lo, hi := r.First, r.Last()
		inh := s.inherited.overlap(lo, hi)
		prior := s.openPrior(lo, hi)
		o := s.announced.add(lo, hi)
		if o > inh {
			l.violate("%d elements of %s announced twice", o-inh, u)
		}
		l.announced += uint64(r.N) - o - prior
	}
}

// openPrior counts the elements of [lo, hi] in open0 not announced again
// yet (counted announced already).
func (s *ledgerSets) openPrior(lo, hi uint64) uint64 {
	if len(s.open0.r) == 0 {
		return 0
	}
	var n uint64
	s.announced.gaps(lo, hi, func(a, b uint64) { n += s.open0.overlap(a, b) })
	return n
}

// Built records u's elements as built by bu, which reported events built
// events from them. An element already built, lost, or never announced is
// a violation.
func (l *Ledger) Built(u Unit, bu string, events uint32) {
	s := l.setsOf(u)
	l.events += uint64(events)
	for _, r := range u.Ranges {
		lo, hi := r.First, r.Last()
		if o := s.built.add(lo, hi); o > 0 {
			l.violate("%d elements of %s built twice (again by %s)", o, u, bu)
		}
		if o := s.lost.overlap(lo, hi); o > 0 {
			l.violate("%d elements of %s built by %s after being counted lost", o, u, bu)
		}
		if a := s.announced.overlap(lo, hi); a != uint64(r.N) {
			l.violate("%d elements of %s built by %s were never announced", uint64(r.N)-a, u, bu)
		}
		l.built += uint64(r.N)
		l.perBU[bu] += uint64(r.N)
	}
}

// Carried records u's elements as built by bu under an earlier EM: a new
// EM learns them from the BU's or an RU's inventory at a takeover (the
// release may not have reached every RU). Those the inherited ledger has
// built already count nothing; the others count as built (by bu) and, of
// those, as carried over.
func (l *Ledger) Carried(u Unit, bu string) {
	s := l.setsOf(u)
	for _, r := range u.Ranges {
		lo, hi := r.First, r.Last()
		inh := s.inherited.overlap(lo, hi)
		o := s.built.add(lo, hi)
		if o > inh {
			l.violate("%d elements of %s carried over after being built", o-inh, u)
		}
		s.carried.add(lo, hi)
		if a := s.announced.overlap(lo, hi); a != uint64(r.N) {
			l.violate("%d elements of %s carried over were never announced", uint64(r.N)-a, u)
		}
		n := uint64(r.N) - o
		l.carried += n
		l.built += n
		l.perBU[bu] += n
	}
}

// Lost records u's elements as lost for reason. An element already built
// or lost, or never announced, is a violation.
func (l *Ledger) Lost(u Unit, reason LostReason) {
	s := l.setsOf(u)
	for _, r := range u.Ranges {
		lo, hi := r.First, r.Last()
		if o := s.lost.add(lo, hi); o > 0 {
			l.violate("%d elements of %s counted lost twice", o, u)
		}
		if o := s.built.overlap(lo, hi); o > 0 {
			l.violate("%d elements of %s counted lost (%s) after being built", o, u, reason)
		}
		if a := s.announced.overlap(lo, hi); a != uint64(r.N) {
			l.violate("%d elements of %s counted lost were never announced", uint64(r.N)-a, u)
		}
		l.lost[reason] += uint64(r.N)
		if len(l.lostIDs[reason]) < maxListed {
			l.lostIDs[reason] = append(l.lostIDs[reason], KeyedRange{u.Run, u.Resync, u.Kind, r.First, r.N})
		}
	}
}

// Duplicate records u's elements, which bu had stored before it was
// declared dead and which another BU builds again, as
// duplicate_after_failover. The ledger balances only once they were built
// (by the other BU); a duplicate of elements counted lost, or reported
// twice, is a violation.
func (l *Ledger) Duplicate(u Unit, bu string) {
	s := l.setsOf(u)
	for _, r := range u.Ranges {
		lo, hi := r.First, r.Last()
		if o := s.lost.overlap(lo, hi); o > 0 {
			l.violate("%d elements of %s reported duplicate by %s were counted lost", o, u, bu)
		}
		if o := s.dup.add(lo, hi); o > 0 {
			l.violate("%d elements of %s reported duplicate twice", o, u)
		}
		l.dup += uint64(r.N)
		if len(l.dupIDs) < maxListed {
			l.dupIDs = append(l.dupIDs, KeyedRange{u.Run, u.Resync, u.Kind, r.First, r.N})
		}
	}
}

// dupNotBuilt counts the duplicate elements not built (yet) by another BU.
func (l *Ledger) dupNotBuilt() uint64 {
	var n uint64
	for _, s := range l.sets {
		for _, sp := range s.dup.r {
			n += (sp.hi - sp.lo + 1) - s.built.overlap(sp.lo, sp.hi)
		}
	}
	return n
}

// LedgerSummary is the farm ledger's state, for `sluice farm status` and
// JSON. Open = Announced - Built - lost: elements queued or assigned and
// not yet built. Sets are the numbers themselves (what a new EM inherits).
type LedgerSummary struct {
	Announced uint64 `json:"announced"`
	Built     uint64 `json:"built"`
	// Carried: of Built, the elements a new EM learnt at a takeover were
	// built under an earlier one (from inventories, not releases).
	Carried      uint64                      `json:"carried"`
	Events       uint64                      `json:"events"`
	Lost         map[LostReason]uint64       `json:"lost"`
	LostIDs      map[LostReason][]KeyedRange `json:"lost_ids,omitempty"`
	Duplicate    uint64                      `json:"duplicate_after_failover"`
	DuplicateIDs []KeyedRange                `json:"duplicate_ids,omitempty"`
	Open         uint64                      `json:"open"`
	PerBU        map[string]uint64           `json:"built_per_bu"`
	Violations   uint64                      `json:"violations"`
	Problems     []string                    `json:"problems,omitempty"`
	Balanced     bool                        `json:"balanced"`
	Sets         []LedgerSet                 `json:"sets,omitempty"`
}

// LedgerSet is the ledger's numbers of one numbering space, as inclusive
// [first, last] ranges, ascending: what it announced, built, counted lost
// (any reason) and duplicate.
type LedgerSet struct {
	Run       uint32      `json:"run"`
	Resync    uint32      `json:"resync"`
	Kind      UnitKind    `json:"kind"`
	Announced [][2]uint64 `json:"announced,omitempty"`
	Built     [][2]uint64 `json:"built,omitempty"`
	Lost      [][2]uint64 `json:"lost,omitempty"`
	Duplicate [][2]uint64 `json:"duplicate,omitempty"`
}

func spans(s *rangeSet) [][2]uint64 {
	if len(s.r) == 0 {
		return nil
	}
	out := make([][2]uint64, len(s.r))
	for i, sp := range s.r {
		out[i] = [2]uint64{sp.lo, sp.hi}
	}
	return out
}

// ErrInherit: a ledger cannot inherit a summary (not empty, or the
// summary's sets disagree with its counts).
var ErrInherit = errors.New("farm: cannot inherit the ledger")

// Inherit makes the empty ledger l go on from prev, the ledger an earlier
// EM of the run published (its Summary): counts, ids and sets. What prev
// had built or counted lost is done; what it had announced and not done
// is open until announced again (the takeover's re-announcements and
// inventories) or, when the takeover ends with nobody holding it, counted
// lost (Unheld). Errors: ErrInherit.
func (l *Ledger) Inherit(prev LedgerSummary) error {
	if l.announced != 0 || len(l.sets) != 0 || l.nViolation != 0 {
		return fmt.Errorf("%w: this ledger is not empty", ErrInherit)
	}
	var announced, built, lost uint64
	for _, ps := range prev.Sets {
		s := l.setsOf(Unit{Run: ps.Run, Resync: ps.Resync, Kind: ps.Kind})
		for _, sp := range ps.Built {
			s.built.add(sp[0], sp[1])
			s.inherited.add(sp[0], sp[1])
		}
		for _, sp := range ps.Lost {
			s.lost.add(sp[0], sp[1])
			s.inherited.add(sp[0], sp[1])
		}
		for _, sp := range ps.Duplicate {
			s.dup.add(sp[0], sp[1])
		}
		// Done is announced here; announced, not done, is open.
		for _, sp := range s.inherited.r {
			s.announced.add(sp.lo, sp.hi)
		}
		for _, sp := range ps.Announced {
			s.inherited.gaps(sp[0], sp[1], func(lo, hi uint64) { s.open0.add(lo, hi) })
		}
		announced += s.inherited.count + s.open0.count
		built += s.built.count
		lost += s.lost.count
	}
	// With violations counts and sets may differ (a double build counts
	// twice, is in the set once): the violations are inherited too.
	if prev.Violations == 0 && (announced != prev.Announced || built != prev.Built || lost != prev.LostTotal()) {
		*l = *NewLedger()
		return fmt.Errorf("%w: its sets hold %d announced, %d built, %d lost; its counts say %d, %d, %d",
			ErrInherit, announced, built, lost, prev.Announced, prev.Built, prev.LostTotal())
	}
	l.announced, l.built, l.carried, l.events, l.dup = prev.Announced, prev.Built, prev.Carried, prev.Events, prev.Duplicate
	for k, v := range prev.Lost {
		l.lost[k] = v
	}
	for k, v := range prev.LostIDs {
		l.lostIDs[k] = append([]KeyedRange(nil), v...)
	}
	for k, v := range prev.PerBU {
		l.perBU[k] = v
	}
	l.dupIDs = append([]KeyedRange(nil), prev.DuplicateIDs...)
	l.nViolation = prev.Violations
	l.violations = append([]string(nil), prev.Problems...)
	return nil
}

// inheritedDone reports whether every element of u was built or counted
// lost by an earlier EM of the run (Inherit).
func (l *Ledger) inheritedDone(u Unit) bool {
	s := l.sets[ledgerKey{u.Run, u.Resync, u.Kind}]
	if s == nil {
		return false
	}
	for _, r := range u.Ranges {
		if s.inherited.overlap(r.First, r.Last()) != uint64(r.N) {
			return false
		}
	}
	return true
}

// Unheld ends a takeover: the inherited open elements nobody announced
// again are counted lost (LostUnheld).
func (l *Ledger) Unheld() {
	for k, s := range l.sets {
		if len(s.open0.r) == 0 {
			continue
		}
		u := Unit{Run: k.run, Resync: k.resync, Kind: k.kind}
		for _, sp := range s.open0.r {
			s.announced.gaps(sp.lo, sp.hi, func(lo, hi uint64) {
				u.Ranges = appendRanges(u.Ranges, []Range{{First: lo, N: uint32(hi - lo + 1)}})
			})
		}
		s.open0 = rangeSet{}
		if len(u.Ranges) > 0 {
			for _, r := range u.Ranges {
				s.announced.add(r.First, r.Last())
			}
			l.Lost(u, LostUnheld)
		}
	}
}

// LostTotal is the sum of Lost over reasons.
func (s LedgerSummary) LostTotal() uint64 {
	var n uint64
	for _, v := range s.Lost {
		n += v
	}
	return n
}

// Summary returns the ledger's counts (copies; the ledger goes on).
func (l *Ledger) Summary() LedgerSummary {
	s := LedgerSummary{Announced: l.announced, Built: l.built, Carried: l.carried, Events: l.events, Duplicate: l.dup,
		Lost: map[LostReason]uint64{}, LostIDs: map[LostReason][]KeyedRange{}, PerBU: map[string]uint64{},
		Violations: l.nViolation, Problems: append([]string(nil), l.violations...)}
	for k, v := range l.lost {
		s.Lost[k] = v
	}
	for k, v := range l.lostIDs {
		s.LostIDs[k] = append([]KeyedRange(nil), v...)
	}
	for k, v := range l.perBU {
		s.PerBU[k] = v
	}
	s.DuplicateIDs = append([]KeyedRange(nil), l.dupIDs...)
	if done := s.Built + s.LostTotal(); done <= s.Announced {
		s.Open = s.Announced - done
	}
	if n := l.dupNotBuilt(); n > 0 {
		s.Violations++
		s.Problems = append(s.Problems, fmt.Sprintf("%d elements reported duplicate_after_failover are not built by another BU", n))
	}
	s.Balanced = s.Violations == 0 && s.Open == 0 && s.Built+s.LostTotal() == s.Announced
	keys := make([]ledgerKey, 0, len(l.sets))
	for k := range l.sets {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		x, y := keys[i], keys[j]
		if x.run != y.run {
			return x.run < y.run
		}
		if x.resync != y.resync {
			return x.resync < y.resync
		}
		return x.kind < y.kind
	})
	for _, k := range keys {
		ls := l.sets[k]
		ann := ls.announced
		if len(ls.open0.r) > 0 {
			ann = rangeSet{r: append([]span(nil), ls.announced.r...), count: ls.announced.count}
			for _, sp := range ls.open0.r {
				ann.add(sp.lo, sp.hi)
			}
		}
		s.Sets = append(s.Sets, LedgerSet{Run: k.run, Resync: k.resync, Kind: k.kind, Announced: spans(&ann),
			Built: spans(&ls.built), Lost: spans(&ls.lost), Duplicate: spans(&ls.dup)})
	}
	return s
}

// Balanced reports whether every announced element is built exactly once
// or lost with a reason, and nothing else happened (no violation).
func (l *Ledger) Balanced() bool { return l.Summary().Balanced }

// String is the ledger as a few lines for operators.
func (s LedgerSummary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "farm ledger: announced %d = built %d", s.Announced, s.Built)
	if s.Carried > 0 {
		fmt.Fprintf(&b, " (%d learnt at an EM takeover)", s.Carried)
	}
	fmt.Fprintf(&b, " + lost %d (open %d)", s.LostTotal(), s.Open)
	if s.Balanced {
		b.WriteString(": balanced\n")
	} else {
		b.WriteString(": NOT balanced\n")
	}
	var reasons []string
	for r := range s.Lost {
		reasons = append(reasons, string(r))
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		fmt.Fprintf(&b, "  lost %-22s %d\n", r, s.Lost[LostReason(r)])
	}
	fmt.Fprintf(&b, "  duplicate_after_failover %d\n", s.Duplicate)
	var bus []string
	for bu := range s.PerBU {
		bus = append(bus, bu)
	}
	sort.Strings(bus)
	for _, bu := range bus {
		fmt.Fprintf(&b, "  built by %-20s %d\n", bu, s.PerBU[bu])
	}
	if s.Violations > 0 {
		fmt.Fprintf(&b, "  violations %d:\n", s.Violations)
		for _, p := range s.Problems {
			fmt.Fprintf(&b, "    %s\n", p)
		}
	}
	return b.String()
}
