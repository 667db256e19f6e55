package schemas

import (
	"slices"
	"testing"
)

func TestVerdictReasonName(t *testing.T) {
	for _, c := range []struct {
		v    Verdict
		want string
	}{
		{Verdict{Stage: "hlt1", Reason: Reason{Kind: ReasonBacklog, Text: "backlog: above 2048 events"}}, "hlt1/backlog"},
		{Verdict{Stage: "hlt1", Reason: Reason{Kind: ReasonFraction, Text: "fraction"}}, "hlt1/fraction"},
		// A plugin's own deferral is named by the plugin, whatever its text.
		{Verdict{Stage: "gec", Reason: Reason{Kind: ReasonPlugin, Plugin: "gec", Text: "event 5: bank 3 truncated"}}, "gec/gec"},
		{Verdict{Stage: "gec", Reason: Reason{Kind: ReasonPlugin}}, "gec/plugin"},
		{Verdict{Stage: "gec", Reason: Reason{Kind: ReasonTriggerError, Text: "x"}, Status: StatusTriggerError}, "gec/trigger-error"},
		{Verdict{Reason: Reason{Kind: ReasonTriggerError}}, "trigger-error"},
		{Verdict{Reason: Reason{Kind: ReasonNoOnlineStage}}, "no-online-stage"},
		{Verdict{Stage: "hlt"}.Decided(), "hlt/undecided"},
		{Verdict{Reason: Reason{Kind: 200}}, "reason(200)"},
	} {
		if got := c.v.ReasonName(); got != c.want {
			t.Errorf("ReasonName(%+v) = %q, want %q", c.v, got, c.want)
		}
	}
}

func TestVerdictDecided(t *testing.T) {
	v := Verdict{Stage: "hlt", Status: StatusTriggerError}.Decided()
	if v.Decision != DecisionDefer || v.Reason.Kind != ReasonUndecided || v.Reason.Text != "undecided" || v.Stage != "hlt" || v.Status != StatusTriggerError {
		t.Fatalf("undecided verdict became %+v", v)
	}
	a := Verdict{Decision: DecisionAccept, Lines: 3}
	if got := a.Decided(); got.Decision != a.Decision || got.Lines != a.Lines || got.Reason != a.Reason {
		t.Fatalf("a decided verdict changed: %+v", got)
	}
}

func TestFiredLines(t *testing.T) {
	var bits []int
	var names []string
	for b, name := range FiredLines(1<<0|1<<2|1<<63, []string{"muon", "", "electron"}) {
		bits, names = append(bits, b), append(names, name)
	}
	if !slices.Equal(bits, []int{0, 2, 63}) || !slices.Equal(names, []string{"muon", "electron", "line63"}) {
		t.Fatalf("bits %v names %v", bits, names)
	}
	if LineName([]string{"a", ""}, 1) != "line1" {
		t.Fatal("an unnamed line must be lineN")
	}
	for range FiredLines(0, nil) {
		t.Fatal("no line fired")
	}
	n := 0
	for range FiredLines(0xff, nil) {
		n++
		break
	}
	if n != 1 {
		t.Fatal("FiredLines did not stop when asked")
	}
}
