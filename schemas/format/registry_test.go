package format

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// fake is a format that matches heads starting with its prefix.
type fake struct {
	name, prefix string
	match        Match
}

func (f fake) Name() string { return f.name }
func (f fake) Sign() string { return "a " + f.name }
func (f fake) Detect(head []byte) Match {
	if bytes.HasPrefix(head, []byte(f.prefix)) {
		return f.match
	}
	return NoMatch
}
func (f fake) Inspect(*Stream, int) (*Report, error) { return &Report{Format: f.name}, nil }

// fakeJoiner also joins, under its export name.
type fakeJoiner struct {
	fake
	export string
}

func (f fakeJoiner) ExportName() string     { return f.export }
func (f fakeJoiner) NewJoiner() EventJoiner { return nil }

// TestDetectOrder: a Certain match wins over a Plausible one registered
// before it; among equal matches the first registered wins.
func TestDetectOrder(t *testing.T) {
	r := NewRegistry(
		fake{"weak", "AB", Plausible},
		fake{"weak-too", "A", Plausible},
		fake{"strong", "ABC", Certain},
		fake{"strong-too", "ABC", Certain},
	)
	for head, want := range map[string]string{"ABCD": "strong", "ABX": "weak", "AX": "weak-too", "X": "", "": ""} {
		got := ""
		if f := r.Detect([]byte(head)); f != nil {
			got = f.Name()
		}
		if got != want {
			t.Errorf("Detect(%q) = %q, want %q", head, got, want)
		}
	}
	if got := r.Signs(); got != "a weak, a weak-too, a strong or a strong-too" {
		t.Errorf("Signs = %q", got)
	}
	if r.Lookup("strong-too") == nil || r.Lookup("none") != nil {
		t.Error("Lookup")
	}
}

// TestRegisterRefuses: names and export names are unique.
func TestRegisterRefuses(t *testing.T) {
	r := NewRegistry(fake{name: "a"}, fakeJoiner{fake{name: "b"}, "bee"})
	if err := r.Register(fake{name: "a"}); err == nil {
		t.Error("a second format named a was registered")
	}
	if err := r.Register(fakeJoiner{fake{name: "c"}, "BEE"}); err == nil {
		t.Error("a second exporter named bee (in capitals) was registered")
	}
	if err := r.Register(fakeJoiner{fake{name: "d"}, "dee"}); err != nil {
		t.Errorf("exporter dee refused: %v", err)
	}
	if len(r.All()) != 3 {
		t.Fatalf("%d formats", len(r.All()))
	}
	if e := r.Exporter("Bee"); e == nil || e.ExportName() != "bee" {
		t.Errorf("Exporter(Bee) = %v", e)
	}
	if n := len(r.Exporters()); n != 2 {
		t.Errorf("%d exporters, want 2 (the joiners bee and dee)", n)
	}
	if _, ok := ExportOf(fake{name: "x"}); ok {
		t.Error("a format that neither joins nor exports is exportable")
	}
}

// section is a report section for TestReportJSON.
type section struct {
	X int `json:"x"`
}

func (section) Key() string         { return "own" }
func (section) Lines(line LineFunc) { line("x", "1") }

// TestReportJSON: the common fields, then the detail, then the section
// under its key; no section, no key.
func TestReportJSON(t *testing.T) {
	rep := &Report{Format: "f", Events: 2, Detail: &Detail{Of: "events", Rows: []int{7}}, Section: section{X: 3}}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.HasPrefix(s, `{"format":"f","bytes":0,`) || !strings.HasSuffix(s, `"detail":{"of":"events","rows":[7]},"own":{"x":3}}`) {
		t.Fatalf("JSON %s", s)
	}
	rep.Section = nil
	if b, _ := json.Marshal(rep); strings.Contains(string(b), "own") || !json.Valid(b) {
		t.Fatalf("JSON without a section %s", b)
	}
}

func TestPlural(t *testing.T) {
	for _, c := range []struct {
		n          int
		noun, want string
	}{{0, "record", "0 records"}, {1, "record", "1 record"}, {2, "frame", "2 frames"}, {1, "record batch", "1 record batch"}, {3, "record batch", "3 record batches"}} {
		if got := Plural(c.n, c.noun); got != c.want {
			t.Errorf("Plural(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
}
