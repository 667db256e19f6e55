package fill

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"gopkg.in/yaml.v3"
)

// ScheduleFile is the schedule file's format, version 1 (YAML): either the
// fills, each from its start to its end (STABLE BEAMS between, no beam
// around them), or the beam modes in the order they follow each other.
// Times are RFC 3339; entries are in time order.
//
//	format: 1
//	fills:
//	  - {fill: 9001, start: 2026-12-01T08:00:00Z, end: 2026-12-01T20:00:00Z}
//	  - {fill: 9002, start: 2026-12-01T22:30:00Z, end: 2026-12-02T10:00:00Z}
//
//	format: 1
//	modes:
//	  - {at: 2026-12-01T07:10:00Z, mode: INJECTION PHYSICS BEAM, fill: 9001}
//	  - {at: 2026-12-01T08:00:00Z, mode: STABLE BEAMS}
//	  - {at: 2026-12-01T20:00:00Z, mode: BEAM DUMP}
//
// With fills, before the first one and after the last the mode is NO BEAM
// and each end is a BEAM DUMP; with modes the state before the first entry
// is unknown, and an entry without a fill number keeps the one before.
// "fills: []" is a valid schedule with no beam at all. The node reads the
// file again when it changes; an invalid new version is reported and the
// last valid one kept.
type ScheduleFile struct {
	Format int             `yaml:"format"`
	Fills  []ScheduledFill `yaml:"fills"`
	Modes  []ScheduledMode `yaml:"modes"`
}

// ScheduledFill is one fill of a schedule.
type ScheduledFill struct {
	Fill  uint32    `yaml:"fill"`
	Start time.Time `yaml:"start"`
	End   time.Time `yaml:"end"`
}

// ScheduledMode is one mode change of a schedule.
type ScheduledMode struct {
	At   time.Time `yaml:"at"`
	Mode string    `yaml:"mode"`
	Fill uint32    `yaml:"fill"`
}

// change is one entry of a parsed schedule: from at on, the mode is mode.
type change struct {
	at   time.Time
	mode Mode
	fill uint32
}

// schedule is a parsed schedule file: its mode changes in time order.
type schedule struct {
	changes []change
	noBeam  bool // before the first change the mode is NO BEAM (a fills schedule), not unknown
}

// ParseSchedule reads a schedule file's bytes. Errors wrap ErrSchedule and
// name the entry and field.
func ParseSchedule(b []byte) (*schedule, error) {
	var f ScheduleFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSchedule, err)
	}
	if f.Format != 1 {
		return nil, fmt.Errorf("%w: format: %d: want 1", ErrSchedule, f.Format)
	}
	switch {
	case f.Fills != nil && f.Modes != nil:
		return nil, fmt.Errorf("%w: want either fills or modes, not both", ErrSchedule)
	case f.Fills == nil && f.Modes == nil:
		return nil, fmt.Errorf("%w: want fills (start/end of each fill) or modes (beam mode changes); \"fills: []\" for none", ErrSchedule)
	}
	s := &schedule{noBeam: f.Fills != nil}
	for i, fl := range f.Fills {
		switch {
		case fl.Start.IsZero():
			return nil, fmt.Errorf("%w: fills[%d].start: want an RFC 3339 time", ErrSchedule, i)
		case fl.End.IsZero():
			return nil, fmt.Errorf("%w: fills[%d].end: want an RFC 3339 time", ErrSchedule, i)
		case !fl.End.After(fl.Start):
			return nil, fmt.Errorf("%w: fills[%d].end: %s: want after its start %s", ErrSchedule, i, stamp(fl.End), stamp(fl.Start))
		case i > 0 && fl.Start.Before(f.Fills[i-1].End):
			return nil, fmt.Errorf("%w: fills[%d].start: %s: want at or after the end of fills[%d] (%s)", ErrSchedule, i, stamp(fl.Start), i-1, stamp(f.Fills[i-1].End))
		}
		s.changes = append(s.changes, change{at: fl.Start, mode: StableBeams, fill: fl.Fill}, change{at: fl.End, mode: BeamDump, fill: fl.Fill})
	}
	var fill uint32
	for i, m := range f.Modes {
		mode, err := ParseMode(m.Mode)
		switch {
		case err != nil:
			return nil, fmt.Errorf("%w: modes[%d].mode: %w", ErrSchedule, i, err)
		case m.At.IsZero():
			return nil, fmt.Errorf("%w: modes[%d].at: want an RFC 3339 time", ErrSchedule, i)
		case i > 0 && !m.At.After(f.Modes[i-1].At):
			return nil, fmt.Errorf("%w: modes[%d].at: %s: want after modes[%d].at (%s)", ErrSchedule, i, stamp(m.At), i-1, stamp(f.Modes[i-1].At))
		}
		if m.Fill != 0 {
			fill = m.Fill
		}
		s.changes = append(s.changes, change{at: m.At, mode: mode, fill: fill})
	}
	return s, nil
}

func stamp(t time.Time) string { return t.Format(time.RFC3339Nano) }

// at is the state at now: the mode of the last change at or before now,
// the period of beam (or of no beam) it belongs to, and the next fill.
func (s *schedule) at(now time.Time) State {
	c := s.changes
	i := len(c) - 1 // the change in force
	for i >= 0 && c[i].at.After(now) {
		i--
	}
	if i < 0 {
		if !s.noBeam {
			return State{} // before a modes schedule's first entry: unknown
		}
		st := State{Mode: NoBeam}
		if len(c) > 0 {
			st.Until, st.NextFill = c[0].at, c[0].at
		}
		return st
	}
	st := State{Mode: c[i].mode, Fill: c[i].fill}
	beam := st.Mode.Beam()
	j := i
	for j > 0 && c[j-1].mode.Beam() == beam {
		j--
	}
	st.Since = c[j].at
	k := i + 1
	for k < len(c) && c[k].mode.Beam() == beam {
		k++
	}
	if k == len(c) {
		return st // the schedule says nothing of the end
	}
	st.Until = c[k].at
	if !beam {
		st.NextFill = st.Until
		return st
	}
	for m := k + 1; m < len(c); m++ {
		if c[m].mode.Beam() {
			st.NextFill = c[m].at
			break
		}
	}
	return st
}

// scheduleSource is a schedule file, read again when it changes.
type scheduleSource struct {
	path string

	mu    sync.Mutex
	sched *schedule
	mtime time.Time
	size  int64
}

// OpenSchedule reads the schedule file at path (ScheduleFile). Errors wrap
// ErrSchedule and name the file.
func OpenSchedule(path string) (Source, error) {
	s := &scheduleSource{path: path}
	if err := s.reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// reload reads the file when it changed since the last read.
func (s *scheduleSource) reload() error {
	fi, err := os.Stat(s.path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSchedule, err)
	}
	if s.sched != nil && fi.ModTime().Equal(s.mtime) && fi.Size() == s.size {
		return nil
	}
	b, err := os.ReadFile(s.path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSchedule, err)
	}
	sc, err := ParseSchedule(b)
	if err != nil {
		return fmt.Errorf("schedule %s: %w", s.path, err)
	}
	s.sched, s.mtime, s.size = sc, fi.ModTime(), fi.Size()
	return nil
}

func (s *scheduleSource) State(_ context.Context, now time.Time) (State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.reload() // on error the last valid schedule stands
	return s.sched.at(now), err
}

func (s *scheduleSource) Describe() string { return "schedule " + s.path }
func (s *scheduleSource) Close() error     { return nil }
