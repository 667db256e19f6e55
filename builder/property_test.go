package builder

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/schemas"
)

// manySources is 1100 sources (more than LHCb's 1025) in three groups with
// gaps between the id ranges.
func manySources() []schemas.SourceGroup {
	var a, b, c []uint32
	for i := range uint32(500) {
		a = append(a, i)
		b = append(b, 1000+i)
	}
	for i := range uint32(100) {
		c = append(c, 5000+i)
	}
	return []schemas.SourceGroup{{Name: "velo", Sources: a}, {Name: "scifi", Sources: b}, {Name: "muon", Sources: c}}
}

type key struct {
	id  uint64
	src uint32
}

// sent is what the test sent for one (event, source): the copy that must win.
type sent struct {
	payload []byte
	corrupt bool
	flagged bool
}

// checkRows compares the emitted events with what was sent. With strict,
// every delivered (event, source) must be in its event (no timeouts).
func checkRows(t *testing.T, rows []row, want map[key]sent, strict bool) {
	t.Helper()
	seen := map[uint64]bool{}
	inRows := 0
	for _, r := range rows {
		if seen[r.id] {
			t.Errorf("event %d emitted twice", r.id)
		}
		seen[r.id] = true
		missing := map[uint32]bool{}
		for _, s := range r.missing {
			missing[s] = true
		}
		corrupt := map[uint32]bool{}
		for _, s := range r.corrupt {
			corrupt[s] = true
		}
		var st schemas.EventStatus
		n := 0
		for src, size := range r.sizes {
			w, ok := want[key{r.id, src}]
			if missing[src] {
				if size != 0 || (strict && ok) {
					t.Errorf("event %d source %d: listed missing (size %d, sent %v)", r.id, src, size, ok)
				}
				continue
			}
			if !ok {
				t.Errorf("event %d source %d: present but never sent", r.id, src)
				continue
			}
			n++
			if !bytes.Equal(r.payloads[src], w.payload) || int(size) != len(w.payload) {
				t.Errorf("event %d source %d: %d bytes (size %d), want %d", r.id, src, len(r.payloads[src]), size, len(w.payload))
			}
			if corrupt[src] != w.corrupt {
				t.Errorf("event %d source %d: corrupt %v, want %v", r.id, src, corrupt[src], w.corrupt)
			}
			if w.corrupt {
				st |= schemas.StatusCorrupt
			}
			if w.flagged {
				st |= schemas.StatusSourceError
			}
		}
		if len(missing) > 0 {
			st |= schemas.StatusIncomplete
		}
		if got := r.status &^ schemas.StatusDuplicates; got != st {
			t.Errorf("event %d: status %b, want %b", r.id, got, st)
		}
		if r.nfrag != n {
			t.Errorf("event %d: n_fragments %d, want %d", r.id, r.nfrag, n)
		}
		inRows += n
	}
	if strict {
		events := map[uint64]bool{}
		for k := range want {
			events[k.id] = true
		}
		if len(events) != len(seen) || inRows != len(want) {
			t.Errorf("%d events with %d fragments emitted, want %d with %d", len(seen), inRows, len(events), len(want))
		}
	}
}

// TestPropertyFragments: random drops, duplicates (first wins), corrupt and
// flagged fragments, delivered one by one in a random order.
func TestPropertyFragments(t *testing.T) {
	groups := manySources()
	var ids []uint32
	for _, g := range groups {
		ids = append(ids, g.Sources...)
	}
	for seed := int64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			h := newHarness(t, Config{Groups: groups, Run: 7, Timeout: time.Hour, BatchEvents: 7, BatchLatency: time.Millisecond, MaxOpenEvents: 64}, true)
			base := uint64(rng.Int63())
			want := map[key]sent{}
			var order []schemas.Fragment
			extra := 0
			id := base
			for e := range uint64(40) {
				id += uint64(1 + rng.Intn(3)) // sparse, increasing
				dropRate := 0.0
				if e%2 == 1 {
					dropRate = 0.04
				}
				for _, src := range ids {
					if rng.Float64() < dropRate {
						continue
					}
					copies := 1
					if rng.Float64() < 0.03 {
						copies = 2
					}
					for range copies {
						p := make([]byte, rng.Intn(48))
						rng.Read(p)
						var flags schemas.FragmentFlag
						if rng.Float64() < 0.01 {
							flags = schemas.FlagSourceError
						}
						order = append(order, frag(src, id, string(p), rng.Float64() < 0.02, flags))
					}
					extra += copies - 1
				}
			}
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			rel := newReleases()
			for _, f := range order {
				k := key{f.EventID, f.SourceID}
				if _, dup := want[k]; !dup {
					want[k] = sent{payload: f.Payload, corrupt: !f.CRCValid(), flagged: f.Flags != 0}
				}
				mustAdd(t, h.b, f, rel.next())
			}
			rows := h.close()
			rel.check(t)
			checkRows(t, rows, want, true)
			l := h.b.Ledger()
			checkBalanced(t, l)
			if l.FragmentsIn != uint64(len(order)) || l.FragmentsInEvents != uint64(len(want)) || l.FragmentsOpen != 0 ||
				l.Discarded[ReasonDuplicate]+l.Discarded[ReasonLate] != uint64(extra) {
				t.Errorf("ledger %+v, sent %d, distinct %d, extra copies %d", l, len(order), len(want), extra)
			}
			if l.EventsComplete == 0 || l.EventsIncomplete == 0 || l.EventsBuilt != uint64(len(rows)) {
				t.Errorf("expected both complete and incomplete events: %+v", l)
			}
		})
	}
}

// TestPropertyPackets: multi-fragment packets (packing factor 5) from 1100
// sources, dropped, duplicated and shuffled, added by three goroutines at
// once under tight limits and a short timeout, with a consumer that reads
// batches. Events may time out; whatever is emitted must hold exactly the
// bytes sent, and the ledger must balance.
func TestPropertyPackets(t *testing.T) {
	groups := manySources()
	var ids []uint32
	for _, g := range groups {
		ids = append(ids, g.Sources...)
	}
	for _, tc := range []struct {
		seed           int64
		maxOpen        int
		maxBytes       int64
		timeout        time.Duration
		strict, noDrop bool
	}{
		{seed: 11, maxOpen: 4096, maxBytes: 1 << 30, timeout: time.Hour, strict: true},
		{seed: 12, maxOpen: 6, maxBytes: 200 << 10, timeout: 20 * time.Millisecond},
		{seed: 13, maxOpen: 40, maxBytes: 1 << 30, timeout: time.Hour, strict: true, noDrop: true},
	} {
		t.Run(fmt.Sprint("seed", tc.seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(tc.seed))
			h := newHarness(t, Config{Groups: groups, Timeout: tc.timeout, MaxOpenEvents: tc.maxOpen, MaxBufferedBytes: tc.maxBytes, BatchEvents: 5, BatchLatency: time.Millisecond}, true)
			const packing, events = 5, 30
			want := map[key]sent{}
			var packets [][]byte
			for _, src := range ids {
				for first := uint64(1000); first < 1000+events; first += packing {
					if !tc.noDrop && rng.Float64() < 0.03 {
						continue
					}
					pay := make([][]byte, packing)
					crcs := make([]uint32, packing)
					for i := range pay {
						pay[i] = make([]byte, rng.Intn(40))
						rng.Read(pay[i])
						crcs[i] = schemas.Checksum(pay[i])
						bad := rng.Float64() < 0.02
						if bad {
							crcs[i]++
						}
						want[key{first + uint64(i), src}] = sent{payload: pay[i], corrupt: bad}
					}
					pkt := schemas.AppendMFP(nil, src, first, 0, uint8(rng.Intn(4)), pay, crcs)
					packets = append(packets, pkt)
					if rng.Float64() < 0.03 {
						packets = append(packets, pkt) // an identical retransmission
					}
				}
			}
			rng.Shuffle(len(packets), func(i, j int) { packets[i], packets[j] = packets[j], packets[i] })
			rel := newReleases()
			releases := make([]func(), len(packets))
			for i := range packets {
				releases[i] = rel.next()
			}
			var wg sync.WaitGroup
			for w := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < len(packets); i += 3 {
						p, _, err := schemas.DecodeMFP(packets[i])
						if err != nil {
							t.Error(err)
							return
						}
						if err := h.b.AddPacket(context.Background(), p, releases[i]); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			rows := h.close()
			rel.check(t)
			checkRows(t, rows, want, tc.strict)
			l := h.b.Ledger()
			checkBalanced(t, l)
			if l.FragmentsIn != uint64(len(packets)*packing) || l.FragmentsOpen != 0 {
				t.Errorf("ledger %+v for %d packets", l, len(packets))
			}
			if tc.strict && l.FragmentsInEvents != uint64(len(want)) {
				t.Errorf("%d fragments in events, want %d", l.FragmentsInEvents, len(want))
			}
			if tc.noDrop && l.EventsComplete != events {
				t.Errorf("%d complete events, want %d", l.EventsComplete, events)
			}
		})
	}
}

// TestPropertyTimeslices: 64 sources each send fragments at random, time
// ordered timestamps (about five per slice), interleaved at random across
// sources, with duplicates and corrupt fragments. Every timeslice must hold,
// per source, exactly the distinct fragments of its core and overlap in
// timestamp order; nothing is late since each source sends in order.
func TestPropertyTimeslices(t *testing.T) {
	const nsrc, slices, dur, overlap = 64, 20, 1000, 100
	groups := []schemas.SourceGroup{{Name: "sts", Sources: make([]uint32, 0, nsrc/2)}, {Name: "trd", Sources: make([]uint32, 0, nsrc/2)}}
	for s := range uint32(nsrc) {
		groups[s%2].Sources = append(groups[s%2].Sources, 300+s)
	}
	for seed := int64(21); seed <= 22; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			h := newHarness(t, Config{Mode: schemas.ModeTimeslice, Groups: groups, SliceDuration: dur, Overlap: overlap, Timeout: time.Hour, BatchEvents: 3, BatchLatency: time.Millisecond}, true)
			type tf struct {
				ts      uint64
				payload []byte
				corrupt bool
			}
			streams := make([][]schemas.Fragment, nsrc)
			kept := map[uint32][]tf{}
			dups, total := 0, 0
			for s := range nsrc {
				src := uint32(300 + s)
				ts := uint64(rng.Intn(200))
				for ts < slices*dur {
					p := make([]byte, 1+rng.Intn(20))
					rng.Read(p)
					f := frag(src, ts, string(p), rng.Float64() < 0.03, 0)
					streams[s] = append(streams[s], f)
					kept[src] = append(kept[src], tf{ts, f.Payload, !f.CRCValid()})
					if rng.Float64() < 0.02 {
						streams[s] = append(streams[s], f)
						dups++
					}
					ts += 1 + uint64(rng.ExpFloat64()*dur/5)
				}
				total += len(streams[s])
			}
			// Interleave: pick a random source, send its next fragment.
			for sent := 0; sent < total; {
				s := rng.Intn(nsrc)
				if len(streams[s]) == 0 {
					continue
				}
				mustAdd(t, h.b, streams[s][0], nil)
				streams[s] = streams[s][1:]
				sent++
			}
			rows := h.close()
			l := h.b.Ledger()
			checkBalanced(t, l)
			if l.FragmentsIn != uint64(total) || l.FragmentsInEvents != uint64(total-dups) || l.Discarded[ReasonDuplicate] != uint64(dups) ||
				l.Discarded[ReasonLate] != 0 || l.OverlapLate != 0 {
				t.Errorf("ledger %+v; sent %d, duplicates %d", l, total, dups)
			}
			if len(rows) != slices {
				t.Errorf("%d timeslices, want %d", len(rows), slices)
			}
			for _, r := range rows {
				lo, hi := r.id*dur, (r.id+1)*dur+overlap
				var st schemas.EventStatus
				n := 0
				for src, fs := range kept {
					var want []byte
					core, corrupt := 0, false
					for _, f := range fs {
						if f.ts >= lo && f.ts < hi {
							want = append(want, f.payload...)
							corrupt = corrupt || f.corrupt
							n++
							if f.ts < (r.id+1)*dur {
								core++
							}
						}
					}
					if !bytes.Equal(r.payloads[src], want) || r.sizes[src] != uint32(len(want)) {
						t.Errorf("slice %d source %d: %d bytes, want %d", r.id, src, len(r.payloads[src]), len(want))
					}
					if core == 0 {
						st |= schemas.StatusIncomplete
					}
					if corrupt {
						st |= schemas.StatusCorrupt
					}
				}
				if r.status&^schemas.StatusDuplicates != st || r.nfrag != n || r.ts != lo {
					t.Errorf("slice %d: status %b nfrag %d ts %d, want %b %d %d", r.id, r.status, r.nfrag, r.ts, st, n, lo)
				}
			}
		})
	}
}

// Adding to open events allocates nothing: event states, slots and batch
// buffers are reused; what remains is a few objects per batch.
func TestHotPathAllocatesNothing(t *testing.T) {
	const nsrc, packing = 256, 8
	sources := make([]uint32, nsrc)
	pkts := make([]schemas.MFP, nsrc)
	for s := range pkts {
		sources[s] = uint32(s)
		pay := make([][]byte, packing)
		for i := range pay {
			pay[i] = make([]byte, 64)
		}
		p, _, err := schemas.DecodeMFP(schemas.AppendMFP(nil, uint32(s), 0, 0, 0, pay, nil))
		if err != nil {
			t.Fatal(err)
		}
		pkts[s] = p
	}
	b, err := New(Config{Groups: []schemas.SourceGroup{{Name: "all", Sources: sources}}, BatchEvents: 64})
	if err != nil {
		t.Fatal(err)
	}
	done := consume(b)
	next := 0
	add := func() {
		p := pkts[next%nsrc]
		p.FirstEventID = uint64(next/nsrc) * packing
		if err := b.AddPacket(context.Background(), p, nil); err != nil {
			t.Fatal(err)
		}
		next++
	}
	for range 20 * nsrc { // warm the pools
		add()
	}
	if avg := testing.AllocsPerRun(50*nsrc, add); avg > 0.5 {
		t.Errorf("%.2f allocations per packet of %d fragments, want < 0.5", avg, packing)
	}
	finish(t, b, done)
}
