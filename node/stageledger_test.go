package node

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/plugins"
	"github.com/sluice-daq/sluice/plugins/sdk"
	"github.com/sluice-daq/sluice/schemas"
)

// twoStageChain is gec then hlt1, each stage counting what it decides as
// plugins.Chain's do: by event id, gec rejects 0 mod 5 and defers 1 mod 5,
// and passes the rest on on its line "small"; hlt1 accepts 2 and 3 mod 5
// on "all" and its prescale rejects 4 mod 5.
type twoStageChain struct {
	mu       sync.Mutex
	gec, hlt plugins.StageState
}

func (c *twoStageChain) Decide(_ context.Context, eb *schemas.EventBatch) ([]schemas.Verdict, error) {
	out := make([]schemas.Verdict, eb.Len())
	var gec, hlt []schemas.Verdict
	for i := range out {
		v := schemas.Verdict{Stage: "gec"}
		switch eb.EventID(i) % 5 {
		case 0:
			v.Decision = schemas.DecisionReject
		case 1:
			v.Decision, v.Reason = schemas.DecisionDefer, schemas.Reason{Kind: schemas.ReasonFraction}
		case 2, 3:
			v.Stage, v.Decision, v.Lines = "hlt1", schemas.DecisionAccept, 1
		default:
			v.Stage, v.Decision, v.Reason = "hlt1", schemas.DecisionReject, schemas.Reason{Kind: schemas.ReasonPrescaled}
		}
		if v.Stage == "hlt1" {
			gec = append(gec, schemas.Verdict{Decision: schemas.DecisionAccept, Lines: 1})
			hlt = append(hlt, v)
		} else {
			gec = append(gec, v)
		}
		out[i] = v
	}
	c.mu.Lock()
	countState(&c.gec, gec)
	countState(&c.hlt, hlt)
	c.mu.Unlock()
	return out, nil
}

func (c *twoStageChain) State() []plugins.StageState {
	c.mu.Lock()
	defer c.mu.Unlock()
	gec, hlt := c.gec, c.hlt
	gec.StageInfo = plugins.StageInfo{Name: "gec", Description: sdk.Description{Lines: []string{"small"}}}
	hlt.StageInfo = plugins.StageInfo{Name: "hlt1", Description: sdk.Description{Lines: []string{"all"}}}
	gec.Lines, hlt.Lines = slices.Clone(gec.Lines), slices.Clone(hlt.Lines)
	return []plugins.StageState{gec, hlt}
}

func (*twoStageChain) Close() {}

// TestLedgerPerStage: the ledger says what each stage saw and decided and
// which of its lines fired (the chain's State), not only the last stage's
// lines.
func TestLedgerPerStage(t *testing.T) {
	cfg := testConfig(t, 1)
	in := &fakeInput{sources: []uint32{0, 1, 2, 3}, events: 1000, packing: 4, size: 100}
	l, _, err := runNode(t, cfg, &Parts{Inputs: []transport.Input{in}, Finite: []bool{true}, Chain: &twoStageChain{}}, nil)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, l.String())
	}
	want := []StageLedger{
		{Name: "gec", Seen: 1000, Accepted: 600, Rejected: 200, Deferred: 200, Lines: map[string]uint64{"small": 600}},
		{Name: "hlt1", Seen: 600, Accepted: 400, Rejected: 200, Prescaled: 200, Lines: map[string]uint64{"all": 400}},
	}
	got, _ := json.Marshal(l.Stages)
	exp, _ := json.Marshal(want)
	if !bytes.Equal(got, exp) {
		t.Fatalf("stages\n got %s\nwant %s", got, exp)
	}
	// The totals stay as they were.
	if l.EventsAccepted != 400 || l.EventsRejected != 400 || l.EventsDeferred != 200 || l.Lines["hlt1/all"] != 400 || !l.Balanced {
		t.Fatalf("totals %s", l.String())
	}
	var b strings.Builder
	if err := l.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	table := b.String()
	for _, row := range [][2]string{
		{"stage gec seen", "1000"}, {"accepted, passed on to hlt1", "600"}, {"line small", "600"},
		{"stage hlt1 seen", "600"}, {"by the prescales", "200"}, {"by the plugin", "0"}, {"line all", "400"},
	} {
		if !hasRow(table, row[0], row[1]) {
			t.Errorf("table has no row %q %s:\n%s", row[0], row[1], table)
		}
	}
	path := filepath.Join(t.TempDir(), "summary.json")
	if err := l.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Stages []struct {
			Name                     string
			Seen, Accepted, Rejected uint64
			Deferred                 uint64
			Lines                    map[string]uint64
		}
		EventsAccepted uint64 `json:"events_accepted"`
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		t.Fatal(err)
	}
	if len(j.Stages) != 2 || j.Stages[0].Name != "gec" || j.Stages[0].Deferred != 200 || j.Stages[1].Lines["all"] != 400 || j.EventsAccepted != 400 {
		t.Fatalf("summary json: %s", raw)
	}
}

// hasRow reports whether table has a line with label followed by value.
func hasRow(table, label, value string) bool {
	for _, line := range strings.Split(table, "\n") {
		f := strings.TrimSpace(line)
		if strings.HasPrefix(f, label) && strings.TrimSpace(strings.TrimPrefix(f, label)) == value {
			return true
		}
	}
	return false
}
