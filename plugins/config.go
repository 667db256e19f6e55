package plugins

import (
	"fmt"
	"os"
	"time"

	"github.com/sluice-daq/sluice/internal/conf"
)

// Trigger is the trigger section of the node's configuration file
// (`trigger:`): the stages, in chain order. No stage run online means every
// built event goes to the deferred stream, to be decided in replay.
type Trigger struct {
	Stages []StageConfig `yaml:"stages"`
}

// StageConfig describes one stage of a trigger chain, a plugin binary run
// out of process. The fields with a yaml key are what a stage of the
// trigger section writes; the others are for programs and tests. Zero
// fields take the values of DefaultStage.
type StageConfig struct {
	Name      string            `yaml:"name"`      // e.g. "llt", "hlt1"; labels logs and metrics (conf.ValidName)
	Plugin    string            `yaml:"plugin"`    // path of the plugin binary
	Instances int               `yaml:"instances"` // plugin processes run in parallel, 1..MaxInstances
	Params    map[string]string `yaml:"params"`    // passed to the plugin's Configure
	// Prescales keeps 1 in N firings of a line (by line name), counted by
	// the host over the events the stage accepts on that line, in the order
	// the stage finishes its batches. An accepted event whose lines are all
	// prescaled away is rejected (schemas.ReasonPrescaled).
	Prescales map[string]uint32 `yaml:"prescales"`
	Deferral  Deferral          `yaml:"deferral"`
	// Deadline bounds each Decide call; a plugin past it is killed and
	// restarted.
	Deadline time.Duration `yaml:"deadline"`
	// When says whether the stage runs online (`sluice run`), in replay
	// (`sluice replay` and inter-fill replay) or in both.
	When When `yaml:"when"`
	// Shadow, when set, runs a second plugin (a candidate version) on the
	// same batches as this stage's plugin and compares their decisions;
	// it never changes what the stage decides.
	Shadow *ShadowConfig `yaml:"shadow"`

	// MaxAttempts (K) is how often a batch is tried before its events are
	// deferred with StatusTriggerError.
	MaxAttempts int `yaml:"-"`
	// RestartBackoff is the wait before restarting a failed process, doubled
	// for each further consecutive failure up to MaxRestartBackoff.
	RestartBackoff    time.Duration `yaml:"-"`
	MaxRestartBackoff time.Duration `yaml:"-"`

	nice   int  // the processes' nice value (a shadow's); 0: the node's
	idle   bool // the processes run under SCHED_IDLE (a shadow's)
	shadow bool // the stage is another's shadow: its failures defer nothing
}

// Deferral is a stage's policy for deferring events to the store instead of
// deciding them now.
type Deferral struct {
	// Fraction of events deferred, chosen by a hash of the event id (so the
	// same events are deferred whatever the batching); 0 to 1.
	Fraction float64 `yaml:"fraction"`
	// Backlog: when more than this many events wait for a free instance of
	// the stage, a new batch is deferred whole (the LHCb deferred trigger).
	// 0 disables it.
	Backlog int `yaml:"backlog"`
}

// When is the kind of run a stage decides in.
type When string

// StageConfig.When values.
const (
	WhenOnline When = "online"
	WhenReplay When = "replay"
	WhenBoth   When = "both"
)

// MaxInstances bounds StageConfig.Instances.
const MaxInstances = 64

// DefaultStage holds the values zero StageConfig fields take: in a chain,
// and in a stage of the trigger section.
func DefaultStage() StageConfig {
	return StageConfig{
		Instances:         1,
		Deadline:          10 * time.Second,
		When:              WhenOnline,
		MaxAttempts:       3,
		RestartBackoff:    50 * time.Millisecond,
		MaxRestartBackoff: 5 * time.Second,
	}
}

func (s StageConfig) withDefaults() StageConfig {
	d := DefaultStage()
	if s.Instances == 0 {
		s.Instances = d.Instances
	}
	if s.Deadline == 0 {
		s.Deadline = d.Deadline
	}
	if s.When == "" {
		s.When = d.When
	}
	if s.MaxAttempts <= 0 {
		s.MaxAttempts = d.MaxAttempts
	}
	if s.RestartBackoff <= 0 {
		s.RestartBackoff = d.RestartBackoff
	}
	if s.MaxRestartBackoff <= 0 {
		s.MaxRestartBackoff = d.MaxRestartBackoff
	}
	if s.Shadow != nil {
		sh := s.Shadow.withDefaults()
		s.Shadow = &sh
	}
	return s
}

// SetDefaults gives every stage's zero fields their defaults (a stage of
// a list is decoded from YAML without them).
func (t *Trigger) SetDefaults() {
	for i := range t.Stages {
		t.Stages[i] = t.Stages[i].withDefaults()
	}
}

// Validate checks the stages and returns their problems, with paths
// relative to the section ("stages[1].plugin").
func (t Trigger) Validate() conf.Problems {
	var ps conf.Problems
	names := map[string]int{}
	for i, s := range t.Stages {
		p := conf.Index("stages", i)
		if !conf.ValidName(s.Name) {
			ps.Add(p+".name", s.Name, conf.NameWant)
		} else if j, dup := names[s.Name]; dup {
			ps.Add(p+".name", s.Name, "want a unique stage name (also trigger.%s)", conf.Index("stages", j))
		}
		names[s.Name] = i
		ps = append(ps, s.validate().In(p)...)
	}
	return ps
}

// validate checks one stage's own fields.
func (s StageConfig) validate() conf.Problems {
	var ps conf.Problems
	if s.Plugin == "" {
		ps.Add("plugin", nil, "want the path of the plugin binary, e.g. bin/plugins/passthrough")
	}
	if s.Instances < 1 || s.Instances > MaxInstances {
		ps.Add("instances", s.Instances, "want 1..%d plugin processes", MaxInstances)
	}
	for line, n := range s.Prescales {
		if n < 1 {
			ps.Add("prescales."+line, n, "want N >= 1 (keep 1 in N)")
		}
	}
	if d := s.Deferral.Fraction; !(d >= 0 && d <= 1) {
		ps.Add("deferral.fraction", d, "want a fraction in [0, 1]")
	}
	if s.Deferral.Backlog < 0 {
		ps.Add("deferral.backlog", s.Deferral.Backlog, "want >= 0 events (0 = off)")
	}
	if s.Deadline <= 0 {
		ps.Add("deadline", s.Deadline, "want a positive duration such as 10s")
	}
	switch s.When {
	case WhenOnline, WhenReplay, WhenBoth:
	default:
		ps.Add("when", s.When, "want %s, %s or %s", WhenOnline, WhenReplay, WhenBoth)
	}
	if s.Shadow != nil {
		ps = append(ps, s.Shadow.validate().In("shadow")...)
	}
	return ps
}

// ValidateReplay checks a list of stage names to replay with (the replay
// section's stages): each must be a stage of t. Paths are relative to the
// list ("[0]").
func (t Trigger) ValidateReplay(names []string) conf.Problems {
	var ps conf.Problems
	have := map[string]bool{}
	for _, s := range t.Stages {
		have[s.Name] = true
	}
	for i, n := range names {
		if !have[n] {
			ps.Add(fmt.Sprintf("[%d]", i), n, "want the name of a stage in trigger.stages")
		}
	}
	return ps
}

// Preflight checks what the stages name on this machine: each plugin is
// an executable file. Paths are relative to the section.
func (t Trigger) Preflight() conf.Problems {
	var ps conf.Problems
	for i, s := range t.Stages {
		p := conf.Index("stages", i)
		ps = append(ps, preflightBinary(s.Plugin).In(p+".plugin")...)
		if s.Shadow != nil {
			ps = append(ps, preflightBinary(s.Shadow.Plugin).In(p+".shadow.plugin")...)
		}
	}
	return ps
}

// preflightBinary checks that path ("" is left to Validate) is an
// executable file; the problem has an empty path, for the caller's In.
func preflightBinary(path string) conf.Problems {
	var ps conf.Problems
	if path == "" {
		return nil
	}
	st, err := os.Stat(path)
	switch {
	case err != nil:
		if pe, ok := err.(*os.PathError); ok {
			err = pe.Err
		}
		ps.Add("", path, "want an existing plugin binary (%v; build the examples with `make plugins`)", err)
	case st.IsDir() || st.Mode().Perm()&0o111 == 0:
		ps.Add("", path, "want an executable file")
	}
	return ps
}

// Online are the stages run by `sluice run`, in chain order.
func (t Trigger) Online() []StageConfig {
	var out []StageConfig
	for _, s := range t.Stages {
		if s.When == WhenOnline || s.When == WhenBoth {
			out = append(out, s)
		}
	}
	return out
}

// Replay are the stages run in replay, in chain order: those named (the
// replay section's stages), else those marked when: replay or both, else
// all.
func (t Trigger) Replay(names []string) []StageConfig {
	var out []StageConfig
	if len(names) > 0 {
		want := map[string]bool{}
		for _, n := range names {
			want[n] = true
		}
		for _, s := range t.Stages {
			if want[s.Name] {
				out = append(out, s)
			}
		}
		return out
	}
	for _, s := range t.Stages {
		if s.When == WhenReplay || s.When == WhenBoth {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return append(out, t.Stages...)
	}
	return out
}
