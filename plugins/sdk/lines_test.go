package sdk

import (
	"testing"

	"github.com/sluice-daq/sluice/schemas"
)

// TestLinesAccept: lines are fired by name, in Description.Lines' bit
// order; a name that is no line fires nothing and is said in the reason.
func TestLinesAccept(t *testing.T) {
	lines := Lines{"big", "scifi_busy", "quiet"}
	v := lines.Accept("big", "quiet")
	if v.Decision != schemas.DecisionAccept || v.Lines != 0b101 || v.Reason.Text != "" {
		t.Fatalf("Accept(big, quiet) = %+v", v)
	}
	if d := (Description{Lines: lines}); len(d.Lines) != 3 || d.Lines[1] != "scifi_busy" {
		t.Fatalf("Lines as Description.Lines: %v", d.Lines)
	}
	v = lines.Accept("scifi_busy", "bgi")
	if v.Lines != 0b010 || v.Reason.Text != `unknown line "bgi" (lines: big, scifi_busy, quiet)` {
		t.Fatalf("Accept with a misspelt name = %+v", v)
	}
	var names []string
	for _, n := range schemas.FiredLines(lines.Accept("quiet", "big").Lines, lines) {
		names = append(names, n)
	}
	if len(names) != 2 || names[0] != "big" || names[1] != "quiet" {
		t.Fatalf("fired lines read back %v", names)
	}
}
