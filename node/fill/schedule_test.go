package fill

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

const fillsDoc = `format: 1
fills:
  - {fill: 9001, start: 2026-12-01T08:00:00Z, end: 2026-12-01T20:00:00Z}
  - {fill: 9002, start: 2026-12-01T22:00:00Z, end: 2026-12-02T06:00:00Z}
`

func TestScheduleFills(t *testing.T) {
	s, err := ParseSchedule([]byte(fillsDoc))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		now  string
		want State
	}{
		{"2026-12-01T07:00:00Z", State{Mode: NoBeam, Until: at("2026-12-01T08:00:00Z"), NextFill: at("2026-12-01T08:00:00Z")}},
		{"2026-12-01T08:00:00Z", State{Mode: StableBeams, Fill: 9001, Since: at("2026-12-01T08:00:00Z"), Until: at("2026-12-01T20:00:00Z"), NextFill: at("2026-12-01T22:00:00Z")}},
		{"2026-12-01T21:00:00Z", State{Mode: BeamDump, Fill: 9001, Since: at("2026-12-01T20:00:00Z"), Until: at("2026-12-01T22:00:00Z"), NextFill: at("2026-12-01T22:00:00Z")}},
		{"2026-12-02T01:00:00Z", State{Mode: StableBeams, Fill: 9002, Since: at("2026-12-01T22:00:00Z"), Until: at("2026-12-02T06:00:00Z")}},
		{"2026-12-02T07:00:00Z", State{Mode: BeamDump, Fill: 9002, Since: at("2026-12-02T06:00:00Z")}},
	}
	for _, c := range cases {
		if got := s.at(at(c.now)); got != c.want {
			t.Errorf("at %s: %+v, want %+v", c.now, got, c.want)
		}
	}
	empty, err := ParseSchedule([]byte("format: 1\nfills: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := empty.at(t0); got != (State{Mode: NoBeam}) {
		t.Errorf("no fills: %+v", got)
	}
}

func TestScheduleModes(t *testing.T) {
	s, err := ParseSchedule([]byte(`format: 1
modes:
  - {at: 2026-12-01T07:10:00Z, mode: INJECTION PHYSICS BEAM, fill: 9001}
  - {at: 2026-12-01T08:00:00Z, mode: stable_beams}
  - {at: 2026-12-01T12:00:00Z, mode: UNSTABLE BEAMS}
  - {at: 2026-12-01T12:05:00Z, mode: STABLE BEAMS}
  - {at: 2026-12-01T20:00:00Z, mode: BEAM DUMP}
  - {at: 2026-12-01T20:30:00Z, mode: RAMP DOWN}
  - {at: 2026-12-01T23:00:00Z, mode: STABLE BEAMS, fill: 9002}
`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		now  string
		want State
	}{
		{"2026-12-01T07:00:00Z", State{}},
		{"2026-12-01T07:30:00Z", State{Mode: InjectionPhysics, Fill: 9001, Since: at("2026-12-01T07:10:00Z"), Until: at("2026-12-01T08:00:00Z"), NextFill: at("2026-12-01T08:00:00Z")}},
		{"2026-12-01T09:00:00Z", State{Mode: StableBeams, Fill: 9001, Since: at("2026-12-01T08:00:00Z"), Until: at("2026-12-01T12:00:00Z"), NextFill: at("2026-12-01T12:05:00Z")}},
		{"2026-12-01T21:00:00Z", State{Mode: RampDown, Fill: 9001, Since: at("2026-12-01T20:00:00Z"), Until: at("2026-12-01T23:00:00Z"), NextFill: at("2026-12-01T23:00:00Z")}},
		{"2026-12-02T00:00:00Z", State{Mode: StableBeams, Fill: 9002, Since: at("2026-12-01T23:00:00Z")}},
	}
	for _, c := range cases {
		if got := s.at(at(c.now)); got != c.want {
			t.Errorf("at %s: %+v, want %+v", c.now, got, c.want)
		}
	}
}

func TestScheduleErrors(t *testing.T) {
	cases := []struct{ doc, want string }{
		{"format: 2\nfills: []", "format: 2: want 1"},
		{"format: 1", "want fills"},
		{"format: 1\nfills: []\nmodes: []", "not both"},
		{"format: 1\nfill: []", "field fill not found"},
		{"format: 1\nfills: [{fill: 1, start: 2026-12-01T08:00:00Z, end: 2026-12-01T07:00:00Z}]", "fills[0].end: 2026-12-01T07:00:00Z: want after its start"},
		{"format: 1\nfills: [{start: 2026-12-01T08:00:00Z}]", "fills[0].end: want an RFC 3339 time"},
		{"format: 1\nfills: [{start: 2026-12-01T08:00:00Z, end: 2026-12-01T10:00:00Z}, {start: 2026-12-01T09:00:00Z, end: 2026-12-01T11:00:00Z}]",
			"fills[1].start: 2026-12-01T09:00:00Z: want at or after the end of fills[0]"},
		{"format: 1\nfills: [{start: yesterday, end: 2026-12-01T10:00:00Z}]", "yesterday"},
		{"format: 1\nmodes: [{at: 2026-12-01T08:00:00Z, mode: COLLISIONS}]", `modes[0].mode: unknown beam mode "COLLISIONS": want one of SETUP`},
		{"format: 1\nmodes: [{at: 2026-12-01T08:00:00Z, mode: NO BEAM}, {at: 2026-12-01T08:00:00Z, mode: STABLE BEAMS}]", "modes[1].at: 2026-12-01T08:00:00Z: want after modes[0].at"},
		{"format: 1\nmodes: [{mode: NO BEAM}]", "modes[0].at: want an RFC 3339 time"},
		{"[1, 2", "yaml"},
	}
	for _, c := range cases {
		_, err := ParseSchedule([]byte(c.doc))
		if !errors.Is(err, ErrSchedule) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want ErrSchedule with %q", c.doc, err, c.want)
		}
	}
}

// TestScheduleReload: the node reads the file again when it changes, and
// keeps the last valid schedule when the new one is not.
func TestScheduleReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "schedule.yaml")
	if err := os.WriteFile(path, []byte("format: 1\nfills: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := OpenSchedule(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	now := at("2026-12-01T09:00:00Z")
	if st, err := src.State(t.Context(), now); err != nil || st.Mode != NoBeam {
		t.Fatalf("%+v %v", st, err)
	}
	write := func(doc string) {
		tmp := path + ".new"
		if err := os.WriteFile(tmp, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(fillsDoc)
	if st, err := src.State(t.Context(), now); err != nil || st.Mode != StableBeams || st.Fill != 9001 {
		t.Fatalf("after the rewrite: %+v %v", st, err)
	}
	write("format: 1\nfills: [{start: nonsense}]\n")
	if st, err := src.State(t.Context(), now); !errors.Is(err, ErrSchedule) || !strings.Contains(err.Error(), path) || st.Fill != 9001 {
		t.Fatalf("an invalid rewrite: %+v %v, want the last valid state and the error", st, err)
	}
	if src.Describe() != "schedule "+path {
		t.Fatal(src.Describe())
	}
	if _, err := OpenSchedule(filepath.Join(t.TempDir(), "none.yaml")); !errors.Is(err, ErrSchedule) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"STABLE BEAMS": StableBeams, "stable beams": StableBeams, "Stable_Beams": StableBeams,
		"beam-dump": BeamDump, "  NO   BEAM ": NoBeam} {
		if m, err := ParseMode(in); err != nil || m != want {
			t.Errorf("%q: %q %v", in, m, err)
		}
	}
	if _, err := ParseMode("BEAMS"); !errors.Is(err, ErrUnknownMode) {
		t.Fatal(err)
	}
	if !StableBeams.Beam() || UnstableBeams.Beam() || BeamDump.Beam() || NoBeam.Beam() {
		t.Fatal("only STABLE BEAMS is a fill")
	}
}
