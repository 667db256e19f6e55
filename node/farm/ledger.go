package farm

import (
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
	// LostTimedOut: no data for the elements reached the BU before its
	// builder timeout.
	LostTimedOut LostReason = "timed_out"
	// LostBUDeadAfterRelease: the BU died after releasing the elements'
	// data (release policy "received") but before its trigger decided.
	LostBUDeadAfterRelease LostReason = "bu_dead_after_release"
	// LostRunStopped: announced, but the run stopped before they were
	// built.
	LostRunStopped LostReason = "run_stopped"
)

// ledgerKey separates numbering spaces: ids restart with a resync and
// packet sequence numbers are not event ids.
type ledgerKey struct {
	run, resync uint32
	kind        UnitKind
}

type ledgerSets struct {
	announced, built, lost, dup, carried rangeSet
}

// Ledger is the farm ledger: every element (event id, or packet sequence
// number) the RUs announced is built by exactly one BU, or lost with a
// reason, and elements rebuilt after a failover that the dead BU had
// already stored are counted duplicate_after_failover. It keeps sets of
// numbers as ranges, so it checks exactness, not only counts: an element
// built twice, built and lost, or built without being announced is
// counted as a violation and the ledger is not balanced. Not safe for
// concurrent use (the EM that owns it is not either).
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
// are a violation (counted, and not announced again).
func (l *Ledger) Announce(u Unit) {
	s := l.setsOf(u)
	for _, r := range u.Ranges {
		if o := s.announced.add(r.First, r.Last()); o > 0 {
			l.violate("%d elements of %s announced twice", o, u)
			l.announced -= o
		}
		l.announced += uint64(r.N)
	}
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
// EM learns them from the BU's inventory at a takeover (the release may
// not have reached every RU). They count as done here, apart from the
// elements this EM saw built, so that summing Built over the EMs of a run
// counts each element once.
func (l *Ledger) Carried(u Unit, bu string) {
	s := l.setsOf(u)
	for _, r := range u.Ranges {
		lo, hi := r.First, r.Last()
		if o := s.built.add(lo, hi); o > 0 {
			l.violate("%d elements of %s carried over after being built", o, u)
		}
		s.carried.add(lo, hi)
		if a := s.announced.overlap(lo, hi); a != uint64(r.N) {
			l.violate("%d elements of %s carried over were never announced", uint64(r.N)-a, u)
		}
		l.carried += uint64(r.N)
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
// declared dead and which another BU built again, as
// duplicate_after_failover. They must have been built (by the other BU).
func (l *Ledger) Duplicate(u Unit, bu string) {
	s := l.setsOf(u)
	for _, r := range u.Ranges {
		lo, hi := r.First, r.Last()
		if b := s.built.overlap(lo, hi); b != uint64(r.N) {
			l.violate("%d elements of %s reported duplicate by %s were not built elsewhere", uint64(r.N)-b, u, bu)
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

// LedgerSummary is the farm ledger's state, for `sluice farm status` and
// JSON. Open = Announced - Built - lost: elements queued or assigned and
// not yet built.
type LedgerSummary struct {
	Announced    uint64                      `json:"announced"`
	Built        uint64                      `json:"built"`
	Carried      uint64                      `json:"carried"` // built under an earlier EM (takeover)
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
	if done := s.Built + s.Carried + s.LostTotal(); done <= s.Announced {
		s.Open = s.Announced - done
	}
	s.Balanced = s.Violations == 0 && s.Open == 0 && s.Built+s.Carried+s.LostTotal() == s.Announced
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
		fmt.Fprintf(&b, " + carried over %d (built under an earlier EM)", s.Carried)
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
