package storage

import (
	"errors"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/sluice-daq/sluice/schemas"
)

// TestProvenanceOnlineAndReplay stores events through a two-stage chain's
// verdicts (one deferred, one accepted after a prescale took a line), replays
// the deferred ones (accepted, rejected) and checks what Why says of each:
// sources, both passes with their plugins, lines fired, kept and prescaled,
// and that a rejected event's record goes with it. The plugin table
// survives a reopen.
func TestProvenanceOnlineAndReplay(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, func(o *Options) { o.Dir = dir })
	if err := s.SetLineNames(map[string][]string{"gec": {"small"}, "hlt1": {"all", "muon"}, "hlt2": {"final"}}); err != nil {
		t.Fatal(err)
	}
	gec := &schemas.PluginID{Stage: "gec", Name: "gec", Version: "1.0.0", Digest: "aa"}
	hlt1 := &schemas.PluginID{Stage: "hlt1", Name: "passthrough", Version: "2.0", Digest: "bb"}
	hlt2 := &schemas.PluginID{Stage: "hlt2", Name: "passthrough", Version: "2.0", Digest: "cc"}
	evs := genEvents(7, 100, 3, 1, 300)
	evs[0].missing, evs[0].status = []uint32{2}, schemas.StatusIncomplete|schemas.StatusDuplicates // a silent source
	evs[0].dups, evs[0].lates, evs[0].asg = []uint32{1, 10}, []uint32{2}, 17                       // 2 came late; 1 and 10 twice
	s.SetBuildUnit("bu-2", 0x7a3c)
	gecStep := schemas.Step{Plugin: gec, Decision: schemas.DecisionAccept, Fired: 1, Lines: 1}
	// 100: deferred by hlt1's fraction; 101: accepted by hlt1, muon
	// prescaled away; 102: deferred by gec.
	evs[0].meta = schemas.Verdict{Decision: schemas.DecisionDefer, Stage: "hlt1", Plugin: hlt1, Reason: schemas.Reason{Text: "fraction"}, Trail: []schemas.Step{gecStep}}
	evs[1].meta = schemas.Verdict{Decision: schemas.DecisionAccept, Stage: "hlt1", Plugin: hlt1, Fired: 3, Lines: 1, Trail: []schemas.Step{gecStep}}
	evs[2].meta = schemas.Verdict{Decision: schemas.DecisionDefer, Stage: "gec", Plugin: gec, Reason: schemas.Reason{Text: "fraction"}}
	before := time.Now()
	put(t, s, Deferred, []testEvent{evs[0], evs[2]})
	put(t, s, Accepted, evs[1:2])

	w, err := s.Why(7, 101)
	if err != nil {
		t.Fatal(err)
	}
	if w.Stream != "accepted" || w.Decision != "accept" || !reflect.DeepEqual(w.Lines, []string{"all"}) || len(w.Passes) != 1 {
		t.Fatalf("why 101: %+v", w)
	}
	p := w.Passes[0]
	wantSteps := []WhyStep{
		{Stage: "gec", Plugin: "gec", Version: "1.0.0", SHA256: "aa", Decision: "accept", Fired: []string{"small"}, Kept: []string{"small"}, Prescaled: []string{}},
		{Stage: "hlt1", Plugin: "passthrough", Version: "2.0", SHA256: "bb", Decision: "accept", Fired: []string{"all", "muon"}, Kept: []string{"all"}, Prescaled: []string{"muon"}},
	}
	if p.Replay || p.At.Before(before.Add(-time.Second)) || p.At.After(time.Now()) || !reflect.DeepEqual(p.Steps, wantSteps) {
		t.Fatalf("why 101 pass: %+v\nwant steps %+v", p, wantSteps)
	}
	w, err = s.Why(7, 100)
	if err != nil {
		t.Fatal(err)
	}
	wantSources := WhySources{Expected: 5, Contributed: 4, Missing: []uint32{2}, Corrupt: []uint32{}, Duplicated: []uint32{1, 10}, Late: []uint32{2}, Duplicates: true}
	wantBuilt := WhyBuilt{BU: "bu-2", Incarnation: "7a3c", Assignment: 17}
	if !reflect.DeepEqual(w.Sources, wantSources) || !reflect.DeepEqual(w.Status, []string{"incomplete", "duplicates"}) || w.Built != wantBuilt {
		t.Fatalf("why 100 sources: %+v status %v built %+v\nwant %+v, %+v", w.Sources, w.Status, w.Built, wantSources, wantBuilt)
	}

	// Replay: 100 accepted by hlt2, 102 rejected.
	c, err := s.NewCursor(Deferred, CursorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Next()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]schemas.Verdict, b.Events.Len())
	for i := range out {
		if b.Events.EventID(i) == 100 {
			out[i] = schemas.Verdict{Decision: schemas.DecisionAccept, Stage: "hlt2", Plugin: hlt2, Fired: 1, Lines: 1}
		} else {
			out[i] = schemas.Verdict{Decision: schemas.DecisionReject, Stage: "hlt2", Plugin: hlt2}
		}
	}
	replayAt := time.Now()
	if _, err := s.Commit(b, out); err != nil {
		t.Fatal(err)
	}
	b.Release()
	if _, err := c.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("cursor after the batch: %v", err)
	}
	c.Close()
	w, err = s.Why(7, 100)
	if err != nil {
		t.Fatal(err)
	}
	if w.Stream != "accepted" || len(w.Passes) != 2 || !reflect.DeepEqual(w.Sources, wantSources) || w.Built != wantBuilt {
		t.Fatalf("why 100 after replay: %+v", w)
	}
	on, re := w.Passes[0], w.Passes[1]
	if on.Replay || len(on.Steps) != 2 || on.Steps[1].Decision != "defer" || on.Steps[1].Reason != "fraction" || on.Steps[1].Stage != "hlt1" {
		t.Fatalf("online pass: %+v", on)
	}
	if !re.Replay || re.Pass != 1 || re.At.Before(replayAt.Add(-time.Second)) || len(re.Steps) != 1 ||
		!reflect.DeepEqual(re.Steps[0], WhyStep{Stage: "hlt2", Plugin: "passthrough", Version: "2.0", SHA256: "cc", Decision: "accept", Fired: []string{"final"}, Kept: []string{"final"}, Prescaled: []string{}}) {
		t.Fatalf("replay pass: %+v", re)
	}
	if _, err := s.Why(7, 102); !errors.Is(err, ErrNoEvent) {
		t.Fatalf("why of a rejected event: %v", err)
	}
	if err := s.db.View(func(txn *badger.Txn) error {
		_, ok, err := s.provenanceOf(txn, Key{Run: 7, EventID: 102})
		if ok || err != nil {
			t.Errorf("a rejected event's provenance record is left (%v)", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Open(Options{Dir: dir, ReadOnly: true, MemTableSize: 8 << 20, ValueLogFileSize: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := r.Plugins(); !reflect.DeepEqual(got, []schemas.PluginID{*gec, *hlt1, *hlt2}) {
		t.Fatalf("plugin table after reopen: %+v", got)
	}
	w2, err := r.Why(7, 100)
	if err != nil || !reflect.DeepEqual(w2.Passes, w.Passes) || !reflect.DeepEqual(w2.Sources, wantSources) || w2.Built != wantBuilt {
		t.Fatalf("why after reopen: %v\n%+v\nwant %+v", err, w2.Passes, w.Passes)
	}
}

// FuzzDecodeProvenance feeds the provenance decoder arbitrary bytes,
// seeded with real records (one and two passes, with and without a build
// section, and version 1's): it must never panic, errors are
// *schemas.DecodeError, and what it accepts encodes back to the same
// record.
func FuzzDecodeProvenance(f *testing.F) {
	t := newPluginTable()
	gec := &schemas.PluginID{Stage: "gec", Name: "gec", Version: "1", Digest: "aa"}
	hlt := &schemas.PluginID{Stage: "hlt1", Name: "passthrough", Version: "2", Digest: "bb"}
	var unstored []uint32
	v := schemas.Verdict{Decision: schemas.DecisionDefer, Stage: "hlt1", Plugin: hlt, Reason: schemas.Reason{Text: "fraction"},
		Trail: []schemas.Step{{Plugin: gec, Decision: schemas.DecisionAccept, Fired: 3, Lines: 1}}}
	one := t.newProvenance(nil, nil, false, 1_800_000_000_000_000_000, &v, &unstored)
	acc := schemas.Verdict{Decision: schemas.DecisionAccept, Stage: "hlt1", Plugin: hlt, Fired: 1 << 63, Lines: 1 << 63}
	two := t.addPass(nil, one, true, 1_800_000_000_000_000_001, &acc, &unstored)
	built := appendBuilt(nil, []uint32{3, 1 << 31}, []uint32{7}, &buildUnit{name: "bu-2", incarnation: 0x7a3c_0000_1234}, 17)
	farm := t.newProvenance(nil, built, false, 1_800_000_000_000_000_000, &v, &unstored)
	f.Add(one)
	f.Add(two)
	f.Add(farm)
	f.Add(t.addPass(nil, farm, true, 1_800_000_000_000_000_001, &acc, &unstored))
	f.Add(append([]byte{1}, one[2:]...)) // version 1: no build section
	f.Add([]byte{ProvenanceVersion, 0, 0})
	f.Add([]byte{ProvenanceVersion + 1, 1})
	f.Fuzz(func(tt *testing.T, b []byte) {
		p, err := t.decodeProvenance(b)
		if err != nil {
			var de *schemas.DecodeError
			if !errors.As(err, &de) {
				tt.Fatalf("error %v is not a *schemas.DecodeError", err)
			}
			return
		}
		// Re-encode: varints may have had redundant bytes, so compare
		// the decoded records, not the bytes.
		var bu *buildUnit
		if p.Built.BU != "" {
			bu = &buildUnit{name: p.Built.BU, incarnation: p.Built.Incarnation}
		}
		built := appendBuilt(nil, p.Built.Duplicated, p.Built.Late, bu, p.Built.Assignment)
		var re []byte
		for i, ps := range p.Passes {
			var vs schemas.Verdict
			if n := len(ps.Steps); n > 0 {
				last := ps.Steps[n-1]
				vs = schemas.Verdict{Decision: last.Decision, Fired: last.Fired, Lines: last.Lines, Plugin: last.Plugin, Stage: "x",
					Reason: schemas.Reason{Text: last.Reason}, Trail: ps.Steps[:n-1]}
			}
			if i == 0 {
				re = t.newProvenance(nil, built, ps.Replay, ps.At, &vs, &unstored)
			} else {
				re = t.addPass(nil, re, ps.Replay, ps.At, &vs, &unstored)
			}
		}
		if len(p.Passes) == 0 {
			return
		}
		q, err := t.decodeProvenance(re)
		if err != nil || !reflect.DeepEqual(q, p) {
			tt.Fatalf("decoded %+v, re-encoded and decoded %+v (%v)", p, q, err)
		}
	})
}

// A version-1 record (before the build section) still reads, and a
// replay pass added to it writes it as version 2 with both passes.
func TestProvenanceVersion1(t *testing.T) {
	tb := newPluginTable()
	hlt := &schemas.PluginID{Stage: "hlt1", Name: "passthrough", Version: "2", Digest: "bb"}
	var unstored []uint32
	v := schemas.Verdict{Decision: schemas.DecisionDefer, Stage: "hlt1", Plugin: hlt, Reason: schemas.Reason{Text: "fraction"}}
	v2 := tb.newProvenance(nil, nil, false, 1_800_000_000_000_000_000, &v, &unstored)
	if v2[0] != 2 || v2[1] != 0 || v2[2] != 1 {
		t.Fatalf("record % x: want version 2, an empty build section, one pass", v2[:3])
	}
	v1 := append([]byte{1}, v2[2:]...)
	p1, err := tb.decodeProvenance(v1)
	if err != nil || len(p1.Passes) != 1 || p1.Passes[0].Steps[0].Reason != "fraction" || !reflect.DeepEqual(p1.Built, schemas.Built{}) {
		t.Fatalf("version 1: %+v, %v", p1, err)
	}
	acc := schemas.Verdict{Decision: schemas.DecisionAccept, Stage: "hlt1", Plugin: hlt}
	up := tb.addPass(nil, v1, true, 1_800_000_000_000_000_001, &acc, &unstored)
	p2, err := tb.decodeProvenance(up)
	if err != nil || up[0] != 2 || len(p2.Passes) != 2 || !reflect.DeepEqual(p2.Passes[0], p1.Passes[0]) || !p2.Passes[1].Replay {
		t.Fatalf("version 1 plus a replay pass: % x: %+v, %v", up, p2, err)
	}
}
