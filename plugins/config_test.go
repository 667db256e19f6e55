package plugins

import (
	"context"
	"strings"
	"testing"
)

// TestTriggerValidate: problems are relative to the trigger section, and
// NewChain refuses the same configurations before starting any process.
func TestTriggerValidate(t *testing.T) {
	good := DefaultStage()
	good.Name, good.Plugin = "hlt1", "p"
	if ps := (Trigger{Stages: []StageConfig{good}}).Validate(); len(ps) != 0 {
		t.Fatalf("default stage invalid: %v", ps)
	}
	bad := good
	bad.Instances, bad.When = MaxInstances+1, "later"
	tr := Trigger{Stages: []StageConfig{good, bad}}
	want := `stages[1].name: "hlt1": want a unique stage name (also trigger.stages[0]); ` +
		`stages[1].instances: 65: want 1..64 plugin processes; stages[1].when: "later": want online, replay or both`
	if got := tr.Validate().String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := tr.ValidateReplay([]string{"hlt1", "hlt9"}).String(); got != `[1]: "hlt9": want the name of a stage in trigger.stages` {
		t.Errorf("replay: %s", got)
	}
	// The binary "p" does not exist: an error about it would mean a process
	// was tried.
	_, err := NewChain(context.Background(), Config{Stages: tr.Stages})
	if err == nil || !strings.Contains(err.Error(), "stages[1].instances: 65") {
		t.Errorf("NewChain: %v", err)
	}
}

// TestStageDefaults: zero fields take DefaultStage's values, set ones stay.
func TestStageDefaults(t *testing.T) {
	tr := Trigger{Stages: []StageConfig{{Name: "a", Plugin: "p"}, {Name: "b", Plugin: "q", Instances: 3, When: WhenReplay}}}
	tr.SetDefaults()
	d := DefaultStage()
	if s := tr.Stages[0]; s.Instances != d.Instances || s.Deadline != d.Deadline || s.When != WhenOnline || s.MaxAttempts != d.MaxAttempts {
		t.Errorf("defaults not applied: %+v", s)
	}
	if s := tr.Stages[1]; s.Instances != 3 || s.When != WhenReplay {
		t.Errorf("set fields changed: %+v", s)
	}
	if on, re := tr.Online(), tr.Replay(nil); len(on) != 1 || on[0].Name != "a" || len(re) != 1 || re[0].Name != "b" {
		t.Errorf("online %v replay %v", on, re)
	}
}
