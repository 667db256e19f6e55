package plugins

import (
	"cmp"
	"maps"
	"math/bits"
	"slices"

	"github.com/sluice-daq/sluice/schemas"
)

// ShadowSample is how many differing event ids a Comparison keeps (the
// latest ones).
const ShadowSample = 64

// Comparison tallies, event by event, how a shadow trigger's decisions
// differ from a production trigger's on the same events. Two decisions
// agree when they are the same and, for accepted events, the same lines
// fired; lines are compared by name, so a shadow version that renumbers or
// adds lines is compared fairly (a line only one side has differs whenever
// it fires). Only an accepted event fires lines: the lines a plugin sets on
// an event it rejects or defers are ignored, as the node ignores them.
// Reasons are not compared. Not safe for concurrent use.
type Comparison struct {
	toProd [schemas.MaxLines]int // shadow bit -> index in names
	names  []string              // production's lines, then the shadow's own
	res    ShadowDiff
	pairs  map[[2]schemas.Decision]uint64
	only   [][2]uint64 // per names index: events only production / only the shadow fired it on
	next   int         // where the next sample id goes once the sample is full
}

// ShadowDiff is the result of a Comparison.
type ShadowDiff struct {
	Compared uint64 // events compared
	Agreeing uint64 // of them, decided alike
	// Differing are the other events, by (production, shadow) decision;
	// a pair with the same decision twice is an accept on other lines.
	// Sorted by production then shadow decision; no zero counts.
	Differing []DecisionPair
	// Lines are the lines that fired on one side only, by line name, in
	// line order (production's lines first); no zero rows.
	Lines []LineDiff
	// Sample holds up to ShadowSample ids of differing events, oldest
	// first: the latest ones.
	Sample []uint64
}

// Differ is the number of differing events.
func (d ShadowDiff) Differ() uint64 { return d.Compared - d.Agreeing }

// DecisionPair counts the events production decided one way and the shadow
// another.
type DecisionPair struct {
	Production, Shadow schemas.Decision
	Events             uint64
}

// LineDiff counts the events one trigger line fired on for one side only.
type LineDiff struct {
	Line                       string
	OnlyProduction, OnlyShadow uint64
}

// NewComparison compares decisions of a production plugin with lines
// prodLines and a shadow plugin with lines shadowLines (their Describe).
func NewComparison(prodLines, shadowLines []string) *Comparison {
	c := &Comparison{pairs: map[[2]schemas.Decision]uint64{}}
	for b := range schemas.MaxLines {
		c.names = append(c.names, schemas.LineName(prodLines, b))
	}
	at := map[string]int{}
	for i, n := range c.names {
		at[n] = i
	}
	for b := range schemas.MaxLines {
		n := schemas.LineName(shadowLines, b)
		i, ok := at[n]
		if !ok {
			i = len(c.names)
			c.names = append(c.names, n)
			at[n] = i
		}
		c.toProd[b] = i
	}
	c.only = make([][2]uint64, len(c.names))
	return c
}

// Add compares one event's decisions and reports whether they differ.
func (c *Comparison) Add(eventID uint64, prod, shadow schemas.Verdict) bool {
	c.res.Compared++
	pl, sl, extra := c.lineSets(prod, shadow)
	if prod.Decision == shadow.Decision && pl == sl && len(extra) == 0 {
		c.res.Agreeing++
		return false
	}
	c.pairs[[2]schemas.Decision{prod.Decision, shadow.Decision}]++
	for l := pl &^ sl; l != 0; l &= l - 1 {
		c.only[bits.TrailingZeros64(l)][0]++
	}
	for l := sl &^ pl; l != 0; l &= l - 1 {
		c.only[bits.TrailingZeros64(l)][1]++
	}
	for _, i := range extra {
		c.only[i][1]++
	}
	if len(c.res.Sample) < ShadowSample {
		c.res.Sample = append(c.res.Sample, eventID)
	} else {
		c.res.Sample[c.next] = eventID
		c.next = (c.next + 1) % ShadowSample
	}
	return true
}

// Differs reports whether Add would count the two decisions as differing,
// without counting them. Safe for concurrent use with Add.
func (c *Comparison) Differs(prod, shadow schemas.Verdict) bool {
	pl, sl, extra := c.lineSets(prod, shadow)
	return prod.Decision != shadow.Decision || pl != sl || len(extra) > 0
}

// lineSets returns the lines each side fired (an accept's), in
// production's bit space, and the names indices of the shadow-only lines
// production does not have.
func (c *Comparison) lineSets(prod, shadow schemas.Verdict) (pl, sl uint64, extra []int) {
	if prod.Decision == schemas.DecisionAccept {
		pl = prod.Lines
	}
	if shadow.Decision == schemas.DecisionAccept {
		for l := shadow.Lines; l != 0; l &= l - 1 {
			b := bits.TrailingZeros64(l)
			if i := c.toProd[b]; i < schemas.MaxLines {
				sl |= 1 << i
			} else {
				extra = append(extra, i)
			}
		}
	}
	return pl, sl, extra
}

// Result is the tally so far.
func (c *Comparison) Result() ShadowDiff {
	r := ShadowDiff{Compared: c.res.Compared, Agreeing: c.res.Agreeing}
	for _, k := range slices.SortedFunc(maps.Keys(c.pairs), func(a, b [2]schemas.Decision) int {
		return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
	}) {
		r.Differing = append(r.Differing, DecisionPair{Production: k[0], Shadow: k[1], Events: c.pairs[k]})
	}
	for i, o := range c.only {
		if o != [2]uint64{} {
			r.Lines = append(r.Lines, LineDiff{Line: c.names[i], OnlyProduction: o[0], OnlyShadow: o[1]})
		}
	}
	r.Sample = slices.Concat(c.res.Sample[c.next:], c.res.Sample[:c.next])
	return r
}
