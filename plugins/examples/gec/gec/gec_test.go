package gec

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/plugins/internal/synthbatch"
	"github.com/sluice-daq/sluice/plugins/sdk/triggertest"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/lhcb"
)

const sample = "../../../../testdata/third_party/lhcb/MiniBrunel_2018_MinBias_FTv4_DIGI_retinacluster_v1.mdf"

// occupancies sums the UT (66) and SciFi (64) bank payload bytes of each
// event of the sample straight from the MDF records, by ODIN event number,
// independently of the splitter, the event batch and the trigger.
func occupancies(t *testing.T, data []byte) map[uint64]uint64 {
	t.Helper()
	out := map[uint64]uint64{}
	err := lhcb.ForEachEvent(bytes.NewReader(data), func(ev *lhcb.Event) error {
		banks, err := lhcb.AppendBanks(nil, ev.Body)
		if err != nil {
			return err
		}
		var id, sum uint64
		for _, b := range banks {
			switch b.Type {
			case 64, 66:
				sum += uint64(len(b.Data))
			case lhcb.BankTypeODIN:
				o, err := lhcb.DecodeODIN(b.Version, b.Data)
				if err != nil {
					return err
				}
				id = o.EventNumber
			}
		}
		out[id] = sum
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRealMDF cuts the ten events of the LHCb MDF sample at a threshold
// between their occupancies and checks every decision.
func TestRealMDF(t *testing.T) {
	data, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	occ := occupancies(t, data)
	t.Logf("UT+SciFi bank payload bytes by event: %v", occ)
	// Hard-coded from the sample (run 6718861), so that a change of the
	// splitter or of the sums shows: UT+SciFi payload bytes per event.
	want := map[uint64]uint64{6001: 25787, 6002: 10487, 6003: 11123, 6004: 13031, 6005: 15328,
		6006: 8848, 6007: 19846, 6008: 16031, 6009: 20698, 6010: 22174}
	for id, w := range want {
		if occ[id] != w {
			t.Fatalf("event %d: %d bytes in the MDF, want %d", id, occ[id], w)
		}
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	batches, err := triggertest.LHCb(mem, data, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer triggertest.Release(batches)
	quiet := map[uint64]bool{6002: true, 6003: true, 6004: true, 6006: true} // <= 15000 bytes
	for _, keepBusy := range []string{"false", "true"} {
		r, err := triggertest.InProcess(New(), map[string]string{"max_bytes": "15000", "keep_busy": keepBusy})
		if err != nil {
			t.Fatal(err)
		}
		got, err := triggertest.Run(context.Background(), r, batches)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 10 {
			t.Fatalf("%d decisions for 10 events", len(got))
		}
		for _, d := range got {
			switch {
			case quiet[d.EventID]:
				if d.Decision != schemas.DecisionAccept || d.Lines != 1<<LineQuiet {
					t.Errorf("quiet event %d: %v lines %b", d.EventID, d.Decision, d.Lines)
				}
			case keepBusy == "true":
				if d.Decision != schemas.DecisionAccept || d.Lines != 1<<LineBusy {
					t.Errorf("busy event %d kept: %v lines %b", d.EventID, d.Decision, d.Lines)
				}
			default:
				if d.Decision != schemas.DecisionReject {
					t.Errorf("busy event %d: %v", d.EventID, d.Decision)
				}
			}
		}
	}
	// Only SciFi: the sums drop, so more events are quiet; check them against
	// the trigger's own Occupancy of each row.
	tr := New()
	if err := tr.Configure(map[string]string{"bank_types": "64", "max_bytes": "15000"}); err != nil {
		t.Fatal(err)
	}
	ev, err := schemas.NewEventBatch(batches[0])
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < ev.Len(); i++ {
		o, err := tr.Occupancy(ev, i)
		if err != nil || o == 0 || o >= occ[ev.EventID(i)] {
			t.Errorf("event %d: SciFi-only occupancy %d (%v), UT+SciFi %d", ev.EventID(i), o, err, occ[ev.EventID(i)])
		}
	}
}

// TestMalformedBank defers an event whose UT fragment does not hold banks.
func TestMalformedBank(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ut := lhcb.SourceID(66, 7)
	groups := []schemas.SourceGroup{{Name: "ut", Sources: []uint32{ut}}}
	good, err := lhcb.AppendBank(nil, lhcb.Bank{Type: 66, SourceID: 7, Data: make([]byte, 100)})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := synthbatch.Build(mem, groups, []synthbatch.Event{
		{ID: 1, Fragments: [][][]byte{{good}}},
		{ID: 2, Fragments: [][][]byte{{{0xCB, 0xCB, 200, 0}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	r, _ := triggertest.InProcess(New(), map[string]string{"max_bytes": "99"})
	got, err := triggertest.Run(context.Background(), r, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Decision != schemas.DecisionReject || got[1].Decision != schemas.DecisionDefer || got[1].Reason.Text == "" {
		t.Fatalf("decisions %+v", got)
	}
}

// TestConfigure refuses bad parameters.
func TestConfigure(t *testing.T) {
	for _, bad := range []map[string]string{{"bank_types": "64,300"}, {"max_bytes": "-1"}, {"keep_busy": "maybe"}, {"max_byte": "1"}} {
		if err := New().Configure(bad); err == nil {
			t.Errorf("Configure(%v) accepted", bad)
		}
	}
}
