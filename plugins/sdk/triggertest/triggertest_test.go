package triggertest

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/internal/synth"
	"github.com/sluice-daq/sluice/plugins/examples/passthrough/passthrough"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/cms"
)

// TestShadow compares passthrough prescaled by 2 with prescaled by 3: they
// differ exactly on the ids divisible by one and not the other.
func TestShadow(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	batches, err := Synthetic(mem, 1, 100, 30, 16, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer Release(batches)
	if len(batches) != 4 {
		t.Fatalf("%d batches of 100 events by 30", len(batches))
	}
	a, err := InProcess(&passthrough.Trigger{}, map[string]string{"prescale": "2"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := InProcess(&passthrough.Trigger{}, map[string]string{"prescale": "3"})
	diffs, err := Shadow(context.Background(), a, b, batches)
	if err != nil {
		t.Fatal(err)
	}
	var want []uint64
	for id := uint64(1); id <= 100; id++ {
		if (id%2 == 0) != (id%3 == 0) {
			want = append(want, id)
		}
	}
	if len(diffs) != len(want) {
		t.Fatalf("%d differences, want %d", len(diffs), len(want))
	}
	for i, d := range diffs {
		if d.EventID != want[i] || (d.A.Decision == schemas.DecisionAccept) != (d.EventID%2 == 0) {
			t.Fatalf("difference %d: %+v, want event %d", i, d, want[i])
		}
	}
	if _, err := InProcess(&passthrough.Trigger{}, map[string]string{"prescale": "0"}); err == nil {
		t.Fatal("prescale 0 accepted")
	}
}

// TestNative reads a stream of native fragments (sent out of order, one
// with a bad CRC, one source missing for one event) back into the batches
// the synthetic generator makes.
func TestNative(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	groups := synth.DefaultGroups()
	var stream []byte
	for _, g := range groups {
		for _, src := range g.Sources {
			for id := uint64(10); id < 20; id++ {
				if id == 15 && src == 0x201 {
					continue // missing
				}
				f := schemas.Fragment{SourceID: src, EventID: id, Payload: synth.Append(nil, synth.KindOf(g.Name), 4, id, src, 24)}
				f.CRC = schemas.Checksum(f.Payload)
				if id == 17 && src == 0x302 {
					f.CRC++
				}
				stream = schemas.AppendFragment(stream, &f, false)
			}
		}
	}
	got, err := Native(mem, stream, groups, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer Release(got)
	want, err := Synthetic(mem, 10, 10, 4, 24, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer Release(want)
	for bi := range want {
		ev, _ := schemas.NewEventBatch(got[bi])
		for i := 0; i < ev.Len(); i++ {
			id := ev.EventID(i)
			switch id {
			case 15:
				if ev.Status(i) != schemas.StatusIncomplete || len(ev.MissingSources(i)) != 1 || ev.MissingSources(i)[0] != 0x201 {
					t.Fatalf("event 15: status %b missing %v", ev.Status(i), ev.MissingSources(i))
				}
			case 17:
				if ev.Status(i) != schemas.StatusCorrupt || ev.CorruptSources(i)[0] != 0x302 {
					t.Fatalf("event 17: status %b corrupt %v", ev.Status(i), ev.CorruptSources(i))
				}
			}
		}
		// Payload columns equal the generator's, except the missing source.
		for g := range groups {
			col := 7 + 2*g
			if g == 1 && bi == 1 { // hcal of events 14..17
				continue
			}
			if !array.Equal(got[bi].Column(col), want[bi].Column(col)) {
				t.Fatalf("batch %d group %s payloads differ", bi, groups[g].Name)
			}
		}
	}
	if _, err := Native(mem, stream[:len(stream)-3], groups, 4); err == nil {
		t.Fatal("truncated stream accepted")
	}
}

// TestLHCbMEP reads the LHCb MEP sample (one multi-event packet of ten
// events) into batches with the MDF sample's event numbers.
func TestLHCbMEP(t *testing.T) {
	data, err := os.ReadFile("../../../testdata/third_party/lhcb/upgrade_mc_minbias_scifi_v5_pf10_retinacluster.mep")
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	batches, err := LHCb(mem, data, 6)
	if err != nil {
		t.Fatal(err)
	}
	defer Release(batches)
	if len(batches) != 2 || batches[0].NumRows() != 6 || batches[1].NumRows() != 4 {
		t.Fatalf("batches of %v", batches)
	}
	ev, err := schemas.NewEventBatch(batches[0])
	if err != nil {
		t.Fatal(err)
	}
	if ev.GroupIndex("bank16") < 0 || ev.GroupIndex("header") < 0 || ev.Status(0) != 0 {
		t.Fatalf("groups %v, status %b", ev.Groups, ev.Status(0))
	}
	t.Logf("MEP sample: %d groups, event ids %d..", len(ev.Groups), ev.EventID(0))
}

// TestFile reads streams of every format that splits, found from their
// bytes, into batches of their events, and refuses what does not split.
func TestFile(t *testing.T) {
	sample := func(rel string) []byte {
		b, err := os.ReadFile("../../../testdata/third_party/" + rel)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Two sources' packets of three events each; source 2's second
	// fragment fails its CRC.
	mfps := schemas.AppendMFP(nil, 1, 40, 0, 3, [][]byte{[]byte("a"), []byte("b"), []byte("c")}, nil)
	mfps = schemas.AppendMFP(mfps, 2, 40, 0, 3, [][]byte{[]byte("d"), []byte("e"), []byte("f")}, []uint32{schemas.Checksum([]byte("d")), 0, schemas.Checksum([]byte("f"))})
	fed, err := cms.AppendFED(nil, &cms.FED{SourceID: 700, LV1ID: 1, Payload: make([]byte, 16)})
	if err != nil {
		t.Fatal(err)
	}
	frd, err := cms.AppendFRD(nil, &cms.FRDEvent{Version: 6, Run: 362000, Event: 9, Data: fed})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name            string
		stream          []byte
		events, sources int
		run             uint32
		group           string
	}{
		{"native packets", mfps, 3, 2, 0, "native"},
		{"LHCb MDF", sample("lhcb/MiniBrunel_2018_MinBias_FTv4_DIGI_retinacluster_v1.mdf"), 10, 1239, 6718861, "bank16"},
		{"VDIF", sample("baseband/sample.vdif"), 2, 8, 0, "vdif"},
		{"CMS FRD", frd, 1, 2, 362000, "fed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			batches, err := File(mem, c.stream, 4)
			if err != nil {
				t.Fatal(err)
			}
			defer Release(batches)
			events := 0
			for _, rec := range batches {
				ev, err := schemas.NewEventBatch(rec)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, g := range ev.Groups {
					n += len(g.Sources)
				}
				if n != c.sources || ev.GroupIndex(c.group) < 0 || ev.Run(0) != c.run {
					t.Fatalf("%d sources in groups %v, run %d", n, ev.Groups, ev.Run(0))
				}
				events += ev.Len()
				if c.name == "native packets" && (ev.Status(1) != schemas.StatusCorrupt || ev.CorruptSources(1)[0] != 2 || ev.EventID(1) != 41) {
					t.Fatalf("event %d: status %b, corrupt %v", ev.EventID(1), ev.Status(1), ev.CorruptSources(1))
				}
			}
			if events != c.events {
				t.Fatalf("%d events, want %d", events, c.events)
			}
		})
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for name, b := range map[string][]byte{"Mark 5B": sample("baseband/sample.m5b"), "text": []byte("not a format at all, just some text")} {
		if _, err := File(mem, b, 4); err == nil || !strings.Contains(err.Error(), "does not split") {
			t.Errorf("%s: error %v", name, err)
		}
	}
	if _, err := LHCb(mem, mfps, 4); err == nil {
		t.Error("LHCb read a native stream")
	}
	if b, err := File(mem, nil, 4); err != nil || b != nil {
		t.Errorf("empty stream: %v, %v", b, err)
	}
}
