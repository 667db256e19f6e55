package node

import (
	"maps"
	"slices"
	"testing"

	"github.com/sluice-daq/sluice/plugins"
	"github.com/sluice-daq/sluice/plugins/sdk"
	"github.com/sluice-daq/sluice/schemas"
)

// TestShadowStatus: /status carries a stage's shadow as the chain reports
// it (pairs as "production/shadow", skipped events by reason), and an
// endpoint that hides paths reduces the shadow's binary to its name too.
func TestShadowStatus(t *testing.T) {
	sh := &plugins.ShadowState{
		Stage: plugins.StageState{StageInfo: plugins.StageInfo{Name: "hlt1/shadow", Plugin: "/opt/triggers/v2/gec",
			Description: sdk.Description{Name: "gec", Version: "2.0.0"}, Instances: 1}, Up: 1, Restarts: 2},
		ShadowDiff: plugins.ShadowDiff{Compared: 100, Agreeing: 90,
			Differing: []plugins.DecisionPair{{Production: schemas.DecisionAccept, Shadow: schemas.DecisionReject, Events: 7},
				{Production: schemas.DecisionReject, Shadow: schemas.DecisionAccept, Events: 3}},
			Lines:  []plugins.LineDiff{{Line: "quiet", OnlyProduction: 7, OnlyShadow: 3}},
			Sample: []uint64{4, 8, 15}},
		Skipped: []plugins.ShadowSkip{{Reason: "queue_full", Batches: 2, Events: 40}, {Reason: "failed", Batches: 1, Events: 20}},
	}
	ps := pluginStatus([]plugins.StageState{{StageInfo: plugins.StageInfo{Name: "hlt1", Plugin: "/opt/triggers/v1/gec"}, Shadow: sh}})
	got := ps[0].Shadow
	if got == nil || got.Plugin != "gec" || got.Version != "2.0.0" || got.Binary != "/opt/triggers/v2/gec" || got.Up != 1 || got.Restarts != 2 ||
		got.Compared != 100 || got.Agreeing != 90 || got.Differing != 10 || !slices.Equal(got.Sample, []uint64{4, 8, 15}) {
		t.Fatalf("shadow status %+v", got)
	}
	if want := map[string]uint64{"accept/reject": 7, "reject/accept": 3}; !maps.Equal(got.ByDecision, want) {
		t.Fatalf("by decision %v, want %v", got.ByDecision, want)
	}
	if want := map[string]uint64{"queue_full": 40, "failed": 20}; !maps.Equal(got.Skipped, want) {
		t.Fatalf("skipped %v, want %v", got.Skipped, want)
	}
	if len(got.ByLine) != 1 || got.ByLine[0] != (ShadowLineStatus{Line: "quiet", OnlyProduction: 7, OnlyShadow: 3}) {
		t.Fatalf("by line %+v", got.ByLine)
	}
	hidden := Status{Plugins: ps}.withoutPaths()
	if b := hidden.Plugins[0].Shadow.Binary; b != "gec" {
		t.Fatalf("hidden paths: shadow binary %q, want gec", b)
	}
	if ps[0].Shadow.Binary != "/opt/triggers/v2/gec" {
		t.Fatal("withoutPaths changed the status it was given")
	}
	if pluginStatus([]plugins.StageState{{}})[0].Shadow != nil {
		t.Fatal("a stage without a shadow has shadow status")
	}
}
