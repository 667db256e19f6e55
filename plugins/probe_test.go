package plugins

import (
	"context"
	"strings"
	"testing"
)

// Probe finds, for every stage at once, what only the plugin knows:
// parameters it refuses, prescales on lines it lacks, source groups it reads
// that the node does not have (named after its parameters are applied).
func TestProbe(t *testing.T) {
	tr := Trigger{Stages: []StageConfig{
		{Name: "l0", Plugin: pluginPath("l0calo"), Params: map[string]string{"muon_pt": "1"}, Prescales: map[string]uint32{"electron": 2, "photon": 3}},
		{Name: "l0b", Plugin: pluginPath("l0calo"), Params: map[string]string{"muon_group": "mu"}},
		{Name: "hlt", Plugin: pluginPath("passthrough"), Prescales: map[string]uint32{"all": 2}},
		{Name: "gone", Plugin: "/nonexistent/plugin"},
	}}
	ps := tr.Probe(context.Background(), []string{"ecal", "hcal", "muon"})
	got := ps.String()
	for _, want := range []string{
		`stages[0].params: "{muon_pt: \"1\"}": want parameters plugin l0calo accepts: unknown parameter "muon_pt"`,
		`stages[0].prescales.photon: 3: want a line plugin l0calo declares (lines: muon, dimuon, hadron, electron)`,
		`stages[1].plugin: "` + pluginPath("l0calo") + `": plugin l0calo reads source group "mu", which sources does not define (groups: ecal, hcal, muon)`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	if len(ps) != 3 || strings.Contains(got, "electron: 2") || strings.Contains(got, "stages[2]") || strings.Contains(got, "stages[3]") {
		t.Errorf("want exactly those 3 problems:\n%s", got)
	}
	if ps := tr.Probe(context.Background(), []string{"ecal", "hcal", "muon", "mu"}); len(ps) != 2 {
		t.Errorf("with group mu defined: %s", ps)
	}
}
