package builder

import (
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/schemas"
)

// adversary modes: what the one bad source sends instead of (or besides)
// its own event ids.
var adversaries = []struct {
	name string
	id   func(rng *rand.Rand, cur, dist uint64) uint64
}{
	{"far-ahead", func(rng *rand.Rand, cur, dist uint64) uint64 { return cur + 2*dist + uint64(rng.Intn(1<<30)) }},
	{"far-behind", func(rng *rand.Rand, cur, dist uint64) uint64 {
		if cur <= dist {
			return cur + dist + 1<<30 // not possible yet: far ahead instead
		}
		return uint64(rng.Int63n(int64(cur - dist)))
	}},
	{"2^63", func(rng *rand.Rand, cur, dist uint64) uint64 { return 1<<63 + uint64(rng.Intn(16)) }},
	{"random", func(rng *rand.Rand, cur, dist uint64) uint64 { return rng.Uint64() }},
	{"near", func(rng *rand.Rand, cur, dist uint64) uint64 {
		return cur - min(cur, dist/2) + uint64(rng.Int63n(int64(dist)))
	}},
	// Its counter resets (to 0, then counts on) while the others go on.
	{"own-reset", nil},
}

// TestPropertyAdversarialIDs: 40 good sources send every event, in order
// with random skew between them; one adversary among them (in the middle
// of the source ids) sends its own fragment of most events and, at random,
// fragments with bad ids of one kind (far ahead, far behind, 2^63, random,
// near but wrong, or its own counter reset). Some seeds also reset every
// counter (a resync) partway. Whatever the adversary does:
//   - every good source's fragment is in exactly one event, with the other
//     good sources' fragments of the same event and epoch: the good
//     sources' events build complete;
//   - nothing of a good source is discarded, and only the adversary has
//     suspect_id discards;
//   - every fragment is accounted for: the ledger balances, and the
//     adversary's fragments are in events or discarded as late, duplicate,
//     suspect_id or reset; every release callback runs once;
//   - only the adversary's counter is ever reset alone, and its own reset
//     (to 0 while the others are at 450) is detected and counted once,
//     its fragments until the end discarded as reset (or, with the resync
//     that follows, some in the resync's events), none late.
func TestPropertyAdversarialIDs(t *testing.T) {
	// An epoch is longer than dist, so that the resync is a jump back of
	// more than dist.
	const ngood, events, maxOpen, dist, skew = 40, 600, 512, 512, 8
	for ai, adv := range adversaries {
		for c := range 4 {
			resync, seed := c%2 == 1, int64(100+4*ai+c)
			t.Run(fmt.Sprintf("%s/resync=%v/seed%d", adv.name, resync, seed), func(t *testing.T) {
				rng := rand.New(rand.NewSource(seed))
				var srcs []uint32
				for s := range uint32(ngood + 1) {
					srcs = append(srcs, 10+s)
				}
				bad := srcs[ngood/2]
				groups := []schemas.SourceGroup{{Name: "a", Sources: srcs[:ngood/2]}, {Name: "b", Sources: srcs[ngood/2:]}}
				h := newHarness(t, Config{Groups: groups, Timeout: time.Hour, BatchEvents: 16, BatchLatency: time.Millisecond,
					MaxOpenEvents: maxOpen, SuspectDistance: dist, MaxSuspectEvents: 64}, true)
				// Each source's stream: its fragments in order; the payload
				// names (epoch, id, source) so that rows can be checked.
				epochs := 1
				if resync {
					epochs = 2
				}
				// at[si][k]: the event index (across epochs) at which fragment k
				// of source si is sent: no source runs more than skew events
				// ahead of the slowest good one.
				streams := make([][]schemas.Fragment, len(srcs))
				at := make([][]int, len(srcs))
				goodSent, badSent := 0, 0
				var resetAt uint64 = events * 3 / 4
				for si, s := range srcs {
					var own uint64 // the adversary's own counter after its reset
					for ep := range epochs {
						for id := uint64(0); id < events; id++ {
							p := fmt.Sprintf("%d/%d/%d", ep, id, s)
							k := ep*events + int(id)
							add := func(f schemas.Fragment) {
								streams[si] = append(streams[si], f)
								at[si] = append(at[si], k)
							}
							if s != bad {
								add(frag(s, id, p, false, 0))
								goodSent++
								continue
							}
							if adv.id == nil && ep == 0 && id >= resetAt {
								// Own reset: from here on its ids are off by resetAt.
								add(frag(s, own, "own/"+p, false, 0))
								own++
								badSent++
								continue
							}
							if rng.Float64() < 0.9 {
								add(frag(s, id, p, false, 0))
								badSent++
							}
							if adv.id != nil && rng.Float64() < 0.2 {
								add(frag(s, adv.id(rng, id, dist), "garbage", false, 0))
								badSent++
							}
						}
					}
				}
				// Merge: a random source sends its next fragment, as long as it
				// is no more than skew events ahead of the slowest good one.
				pos := make([]int, len(srcs))
				rel := newReleases()
				for left := goodSent + badSent; left > 0; {
					slowest := -1
					for si, s := range srcs {
						if s != bad && pos[si] < len(streams[si]) && (slowest < 0 || at[si][pos[si]] < slowest) {
							slowest = at[si][pos[si]]
						}
					}
					si := rng.Intn(len(srcs))
					if pos[si] >= len(streams[si]) || (slowest >= 0 && at[si][pos[si]] > slowest+skew) {
						continue
					}
					mustAdd(t, h.b, streams[si][pos[si]], rel.next())
					pos[si]++
					left--
				}
				rows := h.close()
				rel.check(t)
				l := h.b.Ledger()
				checkBalanced(t, l)

				// Every good (epoch, id) in exactly one row, complete among the good.
				type eid struct {
					ep int
					id uint64
				}
				seen := map[eid]bool{}
				badIn, inRows := 0, 0
				for _, r := range rows {
					inRows += r.nfrag
					ep, good := -1, 0
					for s, p := range r.payloads {
						if s == bad {
							badIn++
							continue
						}
						f := strings.Split(string(p), "/")
						e, _ := strconv.Atoi(f[0])
						if id, _ := strconv.ParseUint(f[1], 10, 64); id != r.id {
							t.Fatalf("event %d holds source %d's fragment of event %d", r.id, s, id)
						}
						if ep >= 0 && e != ep {
							t.Fatalf("event %d mixes epochs %d and %d", r.id, ep, e)
						}
						ep = e
						good++
					}
					if good == 0 {
						// Only the adversary: allowed for ids near the others'
						// (they cannot be told from real ones) and for its own
						// reset counter, which is within reach of the others.
						if adv.name != "near" && adv.name != "own-reset" {
							t.Errorf("event %d built from the adversary alone (%q)", r.id, r.payloads[bad])
						}
						continue
					}
					if good != ngood {
						t.Errorf("event %d (epoch %d): %d of %d good sources", r.id, ep, good, ngood)
					}
					k := eid{ep, r.id}
					if seen[k] {
						t.Errorf("event %d of epoch %d built twice", r.id, ep)
					}
					seen[k] = true
				}
				if len(seen) != epochs*events {
					t.Errorf("%d good events built, want %d", len(seen), epochs*events)
				}
				for s := range l.SuspectBySource {
					if s != bad {
						t.Errorf("good source %d has suspect fragments: %v", s, l.SuspectBySource)
					}
				}
				for s := range l.ResetsBySource {
					if s != bad {
						t.Errorf("good source %d counted reset: %v", s, l.ResetsBySource)
					}
				}
				if adv.name == "own-reset" {
					// 150 fragments after its reset, none of them late; without
					// a resync every one is discarded as reset.
					if r := l.ResetsBySource[bad]; r != 1 && !(resync && r == 0) {
						t.Errorf("adversary's own reset counted %d times (resync %v), want 1", r, resync)
					}
					if l.Discarded[ReasonLate] != 0 || (!resync && l.Discarded[ReasonReset] != events-resetAt) {
						t.Errorf("after its own reset: discarded %v, want %d reset and none late", l.Discarded, events-resetAt)
					}
				}
				if uint64(inRows) != l.FragmentsInEvents || l.FragmentsIn != uint64(goodSent+badSent) {
					t.Errorf("ledger %+v; sent %d good + %d bad, %d fragments in rows", l, goodSent, badSent, inRows)
				}
				d := l.Discarded
				if other := l.Discards() - d[ReasonLate] - d[ReasonDuplicate] - d[ReasonSuspect] - d[ReasonReset]; other != 0 {
					t.Errorf("discarded %v", d)
				}
				// The adversary's fragments not in events were discarded:
				// every good one is in an event.
				if l.FragmentsInEvents-uint64(badIn) != uint64(goodSent) || l.Discards() != uint64(badSent-badIn) {
					t.Errorf("good in events %d of %d sent; adversary: %d in events, %d discarded of %d sent (%v)",
						l.FragmentsInEvents-uint64(badIn), goodSent, badIn, l.Discards(), badSent, d)
				}
				if resync && l.Resyncs != 1 {
					t.Errorf("%d resyncs, want 1", l.Resyncs)
				}
				t.Logf("adversary sent %d, %d in events; discarded %v; resyncs %d", badSent, badIn, d, l.Resyncs)
			})
		}
	}
}
