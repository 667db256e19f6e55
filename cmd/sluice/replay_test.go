package main

import (
	"strings"
	"testing"

	"github.com/sluice-daq/sluice/node"
)

// The replay table keeps the accepted events' lines under "accepted", and
// its parts indented under their totals.
func TestReplaySummaryTable(t *testing.T) {
	var b strings.Builder
	s := &node.ReplaySummary{Selected: 10, Replayed: 10, Accepted: 4, Rejected: 5, Kept: 1, Lines: map[string]uint64{"hlt2/quiet": 4}, Balanced: true}
	if err := writeReplaySummary(&b, s, ""); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "    line hlt2/quiet ") {
			if i == 0 || !strings.HasPrefix(lines[i-1], "  accepted ") || !strings.HasSuffix(strings.TrimSpace(l), " 4") {
				t.Fatalf("the line row is not under accepted:\n%s", b.String())
			}
			return
		}
	}
	t.Fatalf("no line row:\n%s", b.String())
}
