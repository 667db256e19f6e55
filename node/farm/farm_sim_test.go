package farm

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The farm's pure parts together: one EM, three RUs (five sources, the
// trigger source on the first, which announces events), three BUs, wired
// by delivering each one's outputs to the others in random order between
// channels (in order on each). Packets of 3 events against assignments of
// 4 make packets that serve two assignments. BUs die mid-run and come back
// as new incarnations. At the end every announced event was built exactly
// once by a BU whose decision the EM took, from the data of every source,
// the farm ledger balances, and every RU freed every packet.

type fmsg struct {
	to     string // "em", "ru:N", "bu:N"
	fn     func() // the delivery
	gen    uint64 // the destination BU's incarnation when sent (BU inboxes)
	fromEM bool   // sent by the EM (lost in part when it dies)
}

type farmSim struct {
	t      *testing.T
	rng    *rand.Rand
	clk    *fakeClock
	proto  Protocol
	em     *EM
	rus    []*RU
	ruSrc  [][]uint32
	bus    map[string]*BU
	buInc  map[string]uint64
	alive  map[string]bool
	inbox  map[string][]fmsg
	dests  []string
	inc    uint64
	next   [5]uint64 // next event id per source
	end    uint64    // events the readout produces
	pkts   map[*Packet]bool
	frees  int
	got    map[uint64][]*Packet // BU-side data per assignment (current incarnations)
	decide []func()
	built  map[uint64]string   // event id → BU whose build the EM settled
	builds map[uint64][]uint64 // event id → BU incarnations that decided it
	rel    Outcome
	high   uint64 // end of the last id block reserved (etcd's mark)
	oldEMs []*EM
	emKill bool // the simulation kills the EM now and then
	// published is the EM's ledger as it last published it (now and
	// then, as the agent does to etcd): what a new EM inherits.
	published LedgerSummary
	fromEM    bool // messages sent now are the EM's
}

func newFarmSim(t *testing.T, seed uint64, proto Protocol, rel Outcome) *farmSim {
	f := &farmSim{t: t, rng: rand.New(rand.NewPCG(seed, 3)), clk: newClock(), proto: proto, rel: rel,
		bus: map[string]*BU{}, buInc: map[string]uint64{}, alive: map[string]bool{}, inbox: map[string][]fmsg{},
		pkts: map[*Packet]bool{}, got: map[uint64][]*Packet{}, built: map[uint64]string{}, builds: map[uint64][]uint64{}, end: 120,
		ruSrc: [][]uint32{{0, 1}, {2, 3}, {4}}}
	em, err := NewEM(EMConfig{Protocol: proto, AssignmentSize: 4, Linger: time.Millisecond, MaxOutstanding: 2, Release: rel, BlockSize: 16}, 50, f.clk)
	if err != nil {
		t.Fatal(err)
	}
	f.em = em
	for _, src := range f.ruSrc {
		r, err := NewRU(RUConfig{Sources: src, Release: rel, Wait: time.Second}, f.clk)
		if err != nil {
			t.Fatal(err)
		}
		f.rus = append(f.rus, r)
	}
	for i := 0; i < 3; i++ {
		f.startBU(fmt.Sprintf("bu%d", i))
	}
	f.route()
	return f
}

func (f *farmSim) send(to string, fn func()) {
	if !slices.Contains(f.dests, to) {
		f.dests = append(f.dests, to)
	}
	f.inbox[to] = append(f.inbox[to], fmsg{to: to, fn: fn, gen: f.buInc[to[min(3, len(to)):]], fromEM: f.fromEM})
}

func (f *farmSim) startBU(name string) {
	f.inc++
	b, err := NewBU(BUConfig{Node: name, Protocol: f.proto, Release: f.rel, ReleaseGroup: 2, ReleaseLinger: time.Millisecond,
		Slots: 8, SlotBytes: 1 << 30, Wait: time.Second, Sources: []uint32{0, 1, 2, 3, 4}}, f.inc, f.clk)
	if err != nil {
		f.t.Fatal(err)
	}
	for i := range f.rus {
		b.RUJoin(fmt.Sprintf("ru%d", i), f.ruSrc[i])
	}
	f.bus[name], f.buInc[name], f.alive[name] = b, f.inc, true
	f.em.Join(name, f.inc)
	b.Lead(f.em.Epoch())
	f.inbox["bu:"+name] = nil // messages for an earlier incarnation are gone with it
}

// route moves every component's outputs into the inboxes.
func (f *farmSim) route() {
	f.fromEM = true
	defer func() { f.fromEM = false }()
	for _, o := range f.em.Outputs() {
		switch o.Kind {
		case OutReserve:
			f.send("em", f.reserveNext)
		case OutRelease:
			rel := o.Release
			for i := range f.rus {
				r := f.rus[i]
				f.send(fmt.Sprintf("ru:%d", i), func() { r.Release(rel) })
			}
		case OutAssign:
			a := o.Assign
			f.send("bu:"+a.BU, func() { f.bus[a.BU].Assign(a) })
			if o.ToRUs {
				for i := range f.rus {
					r := f.rus[i]
					f.send(fmt.Sprintf("ru:%d", i), func() { r.Assign(a) })
				}
			}
		}
	}
	f.fromEM = false
	for i, r := range f.rus {
		from := fmt.Sprintf("ru%d", i)
		for _, o := range r.Outputs() {
			switch o.Kind {
			case RUSend:
				h, ps := o.Header, o.Packets
				bu := o.BU
				var srcs []uint32
				for _, p := range ps {
					if !slices.Contains(srcs, p.Source) {
						srcs = append(srcs, p.Source)
					}
				}
				f.send("bu:"+bu, func() {
					if f.bus[bu].Data(from, h, srcs) {
						f.got[h.Assignment] = append(f.got[h.Assignment], ps...)
					}
				})
			case RUFree:
				if !f.pkts[o.Packet] {
					f.t.Fatalf("RU %d freed a packet twice or never held: %+v", i, o.Packet)
				}
				delete(f.pkts, o.Packet)
				f.frees++
			}
		}
	}
	for name, b := range f.bus {
		for _, o := range b.Outputs() {
			switch o.Kind {
			case BUCredit:
				c := o.Credit
				f.send("em", func() { f.em.Credit(c) })
			case BURequest:
				q, ru := o.Request, o.RU
				var idx int
				fmt.Sscanf(ru, "ru%d", &idx)
				f.send(fmt.Sprintf("ru:%d", idx), func() { f.rus[idx].Assign(Assign(q)) })
			case BURelease:
				rel := o.Release
				f.send("em", func() { f.em.Release(rel) })
			case BUComplete:
				a, miss := o.Assignment, o.Missing
				inc := f.buInc[name]
				f.checkData(a, miss)
				bb := b
				f.decide = append(f.decide, func() {
					if f.buInc[name] != inc || !f.alive[name] {
						return // the BU died before deciding
					}
					bb.Outcome(a.ID, OutcomeDecided, uint32(a.Unit.Len()))
					for _, r := range a.Unit.Ranges {
						for id := r.First; id <= r.Last(); id++ {
							f.builds[id] = append(f.builds[id], inc)
						}
					}
					if f.rel == OutcomeDurable {
						bb.Outcome(a.ID, OutcomeDurable, uint32(a.Unit.Len()))
					}
				})
			}
		}
	}
}

// reserveNext grants the EM the block above the farm's mark (etcd's job).
func (f *farmSim) reserveNext() {
	first := max(f.high, 1)
	f.high = first + 16
	if err := f.em.Reserved(Block{First: first, End: f.high}); err != nil {
		f.t.Fatal(err)
	}
}

// killEM: the EM's process dies: what was sent to it is lost, and of what
// it sent some never left; a new EM of a higher epoch takes over, the live
// BUs report their inventories, the trigger source's RU announces again
// what it holds unreleased.
func (f *farmSim) killEM() {
	f.inbox["em"] = nil
	for d, q := range f.inbox {
		kept := q[:0]
		for _, m := range q {
			if !m.fromEM || f.rng.IntN(2) == 0 {
				kept = append(kept, m)
			}
		}
		f.inbox[d] = kept
	}
	f.oldEMs = append(f.oldEMs, f.em)
	cfg := f.em.cfg
	em, err := NewEM(cfg, f.em.Epoch()+10, f.clk)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := em.Ledger().Inherit(f.published); err != nil {
		f.t.Fatal(err)
	}
	f.em = em
	var parties []string
	var names []string
	for n, ok := range f.alive {
		if ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		em.Join(n, f.buInc[n])
		parties = append(parties, n)
	}
	for i := range f.rus {
		parties = append(parties, fmt.Sprintf("ru%d", i))
	}
	em.Reconcile(parties)
	for _, n := range names {
		b := f.bus[n]
		b.Lead(em.Epoch())
		inv := b.Inventory(em.Epoch())
		f.send("em", func() { f.em.Inventory(inv) })
	}
	// Each RU reports when its inbox is next served (it may first apply
	// relays the old EM sent before dying); the trigger source's RU first
	// announces again what it holds unreleased.
	epoch := em.Epoch()
	for i := range f.rus {
		r := f.rus[i]
		f.send(fmt.Sprintf("ru:%d", i), func() {
			if i == 0 {
				for _, u := range r.Unassigned(0) {
					f.send("em", func() {
						if err := f.em.Announce(u); err != nil {
							f.t.Fatal(err)
						}
					})
				}
			}
			inv := r.Inventory(epoch, fmt.Sprintf("ru%d", i), 0)
			f.send("em", func() { f.em.Inventory(inv) })
		})
	}
}

// checkData: a complete assignment's data holds every element of every
// source, once (no RU died in this simulation).
func (f *farmSim) checkData(a Assign, miss []uint32) {
	if len(miss) > 0 {
		for i, r := range f.rus {
			ra := r.assigns[a.ID]
			if ra != nil {
				f.t.Logf("ru%d: sent %v since %v packets %d missing %v", i, ra.sent, ra.since, len(ra.packets), r.missing(ra))
			} else {
				f.t.Logf("ru%d: unknown", i)
			}
		}
		f.t.Fatalf("assignment %+v completed with sources %v missing (now %v)", a, miss, f.clk.Now())
	}
	for src := uint32(0); src < 5; src++ {
		for _, rg := range a.Unit.Ranges {
			for id := rg.First; id <= rg.Last(); id++ {
				n := 0
				for _, p := range f.got[a.ID] {
					if p.Source == src && id >= p.First && id < p.First+uint64(p.N) {
						n++
					}
				}
				if n != 1 {
					f.t.Fatalf("assignment %d: event %d has %d fragments of source %d", a.ID, id, n, src)
				}
			}
		}
	}
	delete(f.got, a.ID)
}

// produce: the readout of one source emits its next packet; the trigger
// source's RU announces the events it names.
func (f *farmSim) produce() bool {
	var cands []uint32
	for s := uint32(0); s < 5; s++ {
		if f.next[s] < f.end {
			cands = append(cands, s)
		}
	}
	if len(cands) == 0 {
		return false
	}
	s := cands[f.rng.IntN(len(cands))]
	n := uint32(min(3, f.end-f.next[s]))
	p := &Packet{Key: UnitKey{Run: 1, Kind: UnitEvents}, Source: s, First: f.next[s], N: n, Bytes: 300}
	f.next[s] += uint64(n)
	ru := 0
	for i, src := range f.ruSrc {
		if slices.Contains(src, s) {
			ru = i
		}
	}
	f.pkts[p] = true
	r := f.rus[ru]
	f.send(fmt.Sprintf("ru:%d", ru), func() {
		if err := r.Add(p); err != nil {
			f.t.Fatal(err)
		}
		// The trigger source's RU names the events as it reads them.
		if s == 0 {
			u := Unit{Run: 1, Kind: UnitEvents, Ranges: []Range{{First: p.First, N: n}}}
			f.send("em", func() {
				if err := f.em.Announce(u); err != nil {
					f.t.Fatal(err)
				}
			})
		}
	})
	return true
}

// deliver runs the first message of a random channel.
func (f *farmSim) deliver() bool {
	var ready []string
	for _, d := range f.dests {
		if len(f.inbox[d]) > 0 {
			ready = append(ready, d)
		}
	}
	if len(ready) == 0 {
		return false
	}
	d := ready[f.rng.IntN(len(ready))]
	m := f.inbox[d][0]
	f.inbox[d] = f.inbox[d][1:]
	if len(d) > 3 && d[:3] == "bu:" && (!f.alive[d[3:]] || f.buInc[d[3:]] != m.gen) {
		return true // sent to a dead incarnation
	}
	m.fn()
	return true
}

func (f *farmSim) kill() {
	var names []string
	for n, ok := range f.alive {
		if ok {
			names = append(names, n)
		}
	}
	if len(names) < 2 {
		return
	}
	slices.Sort(names)
	n := names[f.rng.IntN(len(names))]
	f.alive[n] = false
	inc := f.buInc[n]
	// The EM learns of it a little later (heartbeats, fencing).
	f.send("em", func() { f.em.Dead(n, inc) })
}

func (f *farmSim) run(steps int) {
	for i := 0; i < steps; i++ {
		switch x := f.rng.IntN(100); {
		case x < 25:
			f.produce()
		case x < 85:
			f.deliver()
		case x < 92:
			if len(f.decide) > 0 {
				j := f.rng.IntN(len(f.decide))
				d := f.decide[j]
				f.decide = append(f.decide[:j], f.decide[j+1:]...)
				d()
			}
		case x < 93:
			if f.emKill && f.rng.IntN(3) == 0 {
				f.killEM()
			} else {
				f.kill()
			}
		case x < 95:
			for n, ok := range f.alive {
				if !ok {
					f.startBU(n)
					break
				}
			}
		default:
			f.clk.advance(time.Millisecond)
			if f.rng.IntN(4) == 0 {
				f.published = f.em.Ledger().Summary()
			}
			f.em.Tick()
			for _, r := range f.rus {
				r.Tick()
			}
			for n, b := range f.bus {
				if f.alive[n] {
					b.Tick()
				}
			}
		}
		f.route()
	}
}

func (f *farmSim) finish() {
	for f.produce() {
		f.route()
	}
	f.em.Flush()
	for round := 0; ; round++ {
		if round > 100000 {
			f.t.Fatalf("farm did not drain: EM %+v", f.em.Stats())
		}
		progressed := f.deliver()
		if len(f.decide) > 0 {
			d := f.decide[0]
			f.decide = f.decide[1:]
			d()
			progressed = true
		}
		f.clk.advance(time.Millisecond)
		f.em.Tick()
		for n, b := range f.bus {
			if f.alive[n] {
				b.Tick()
			}
		}
		f.route()
		st := f.em.Stats()
		if !progressed && st.Queued == 0 && st.Open == 0 && st.Undecided == 0 {
			break
		}
	}
	for _, r := range f.rus {
		r.Stop()
	}
	f.route()
	l := f.em.Ledger().Summary()
	if !l.Balanced {
		f.t.Fatalf("ledger:\n%s", l)
	}
	// Every event was built, and never by two BU incarnations that lived
	// on: a second build happens only when the first builder died (its
	// stored events would then count as duplicate_after_failover).
	live := map[uint64]bool{}
	for n, ok := range f.alive {
		if ok {
			live[f.buInc[n]] = true
		}
	}
	for id := uint64(0); id < f.end; id++ {
		bs := f.builds[id]
		nLive := 0
		for _, inc := range bs {
			if live[inc] {
				nLive++
			}
		}
		if len(bs) == 0 || nLive > 1 {
			f.t.Fatalf("event %d decided by BU incarnations %v (live at the end: %v)", id, bs, live)
		}
	}
	// The ledger spans the takeovers (each new EM inherited a stale copy
	// of its predecessor's): the whole run, every event built.
	if l.Announced != f.end || l.Built != f.end {
		f.t.Fatalf("ledger:\n%s", l)
	}
	if len(f.pkts) != 0 {
		f.t.Fatalf("%d packets never freed", len(f.pkts))
	}
}

func TestFarmSimulation(t *testing.T) {
	for _, proto := range []Protocol{Push, Pull} {
		for _, rel := range []Outcome{OutcomeDecided, OutcomeDurable} {
			for _, emKill := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v-%v-emkill=%v", proto, rel, emKill), func(t *testing.T) {
					var reassigned, takeovers, adopted uint64
					for seed := uint64(1); seed <= 30; seed++ {
						f := newFarmSim(t, seed, proto, rel)
						f.emKill = emKill
						f.run(1500)
						f.finish()
						reassigned += f.em.Stats().Reassigned
						takeovers += uint64(len(f.oldEMs))
						for _, em := range append(f.oldEMs, f.em) {
							adopted += em.Stats().Adopted
						}
					}
					if reassigned == 0 || emKill && (takeovers == 0 || adopted == 0) {
						t.Fatalf("%d reassignments, %d takeovers, %d adopted: the test proves nothing", reassigned, takeovers, adopted)
					}
					t.Logf("%d reassignments, %d EM takeovers, %d assignments adopted", reassigned, takeovers, adopted)
				})
			}
		}
	}
}
