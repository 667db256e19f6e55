package conf

import (
	"strings"
	"testing"
	"time"
)

func TestIn(t *testing.T) {
	var ps Problems
	ps.Add("mode", "eventz", "want event or timeslice")
	ps.Add("", nil, "want at least one")
	ps.Add("[2].plugin", nil, "want the path")
	ps.Add("memory_budget", ByteSize(1<<10), "want at least %s", ByteSize(4<<20))
	ps.Add("timeout", time.Duration(0), "want a positive duration")
	type mode string
	ps.Add("when", mode("later"), "want online")
	got := strings.Join(strings.Split(ps.In("builder").String(), "; "), "\n")
	want := `builder.mode: "eventz": want event or timeslice
builder: want at least one
builder[2].plugin: want the path
builder.memory_budget: 1KiB: want at least 4MiB
builder.timeout: 0s: want a positive duration
builder.when: "later": want online`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if p := (Problem{Path: "a.b", Line: 7, Expected: "x"}).String(); p != "a.b (line 7): x" {
		t.Errorf("with line: %q", p)
	}
	if Join("", "x") != "x" || Index("stages", 3) != "stages[3]" {
		t.Error("Join or Index")
	}
}

func TestByteSizeString(t *testing.T) {
	for b, want := range map[ByteSize]string{0: "0", 1000: "1000", 4 << 10: "4KiB", 256 << 20: "256MiB", 3 << 30: "3GiB", 1<<20 + 1: "1048577"} {
		if got := b.String(); got != want {
			t.Errorf("%d: %q, want %q", uint64(b), got, want)
		}
	}
}

func TestValidName(t *testing.T) {
	for s, want := range map[string]bool{"hlt1": true, "a_b": true, "": false, "Velo": false, "1x": false, "a-b": false,
		"abcdefghijklmnopqrstuvwxyz012345": true, "abcdefghijklmnopqrstuvwxyz0123456": false} {
		if ValidName(s) != want {
			t.Errorf("ValidName(%q) = %v", s, !want)
		}
	}
}
