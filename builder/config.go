package builder

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/schemas"
)

// Limits of Config fields.
const (
	MaxBatchEvents = 1 << 20
	MaxLateWindow  = 1 << 24
	// MaxAssignedIDs bounds the event ids of the assignments expected at
	// once (Config.Assigned), one bit each.
	MaxAssignedIDs = 1 << 26
)

// Config configures a Builder. The fields with a yaml key are the builder's
// part of the builder section of the node's configuration file
// (`builder:`); the others are set by the program. Zero fields take the
// values of Defaults.
type Config struct {
	// Mode is schemas.ModeEvent (events keyed by event id) or
	// schemas.ModeTimeslice (timeslices keyed by time interval).
	Mode schemas.Mode `yaml:"mode"`
	// Timeout: an event still incomplete this long after its first
	// fragment arrived is emitted incomplete.
	Timeout time.Duration `yaml:"timeout"`
	// BehindWait: an event past its Timeout waits on while one of its
	// missing sources is behind it (has not yet reached its id) and still
	// sending: it placed a fragment within the last BehindWait (see
	// behind.go). 0: the default, 5s; negative: never (every event goes
	// out at Timeout).
	BehindWait time.Duration `yaml:"behind_wait"`
	// SliceDuration is the timeslice length (timeslice mode only, where it
	// is required); a fragment's EventID is then its timestamp in ns.
	SliceDuration time.Duration `yaml:"slice_duration"`
	// Overlap is how long after a timeslice's end a fragment is also given
	// to that timeslice (timeslice mode only; 0 <= Overlap < SliceDuration).
	Overlap time.Duration `yaml:"overlap"`
	// MaxOpenEvents bounds the events held by the builder: under
	// construction plus emitted but not yet in a delivered batch.
	MaxOpenEvents int `yaml:"max_open_events"`
	// BatchEvents closes a batch at this many events (at most
	// MaxBatchEvents).
	BatchEvents int `yaml:"batch_events"`
	// BatchLatency closes a batch this long after its first event.
	BatchLatency time.Duration `yaml:"batch_latency"`
	// SuspectDistance (event ids, event mode): a fragment whose id is
	// further than this from the reference (the median of the sources'
	// latest ids) is suspect, and a source whose counter jumps back by more
	// than this votes for a counter reset; see the package doc, "Event
	// identity". 0: 16 × MaxOpenEvents. Otherwise at least MaxOpenEvents:
	// sources legitimately run that many events apart.
	SuspectDistance uint64 `yaml:"suspect_distance"`
	// MaxSuspectEvents bounds the events opened by suspect fragments and
	// held, apart from MaxOpenEvents, until the other sources confirm or
	// refute them (a confirmed one stays in this room until its batch is
	// assembled); a suspect fragment that finds no room is discarded
	// ("suspect_id") at once, never waits.
	MaxSuspectEvents int `yaml:"max_suspect_events"`
	// Quorum is how many sources must have sent before the reference
	// exists, must jump back together for a counter reset, and must be in
	// an event for its id to move the late rule's lower edge. 0: more than
	// half of the expected sources.
	Quorum int `yaml:"quorum"`

	// Groups are the expected sources, grouped; each group becomes one
	// payload column. At least one source; source ids unique across groups.
	// Any order is accepted: New sorts each group's sources ascending, the
	// payload order of event batches (schemas.EventSchema).
	Groups []schemas.SourceGroup `yaml:"-"`
	// Run is written in the run column of every row.
	Run uint32 `yaml:"-"`
	// MaxBufferedBytes bounds the payload bytes referenced by held events.
	// A single fragment larger than the bound is still accepted when
	// nothing else is held, so that it cannot block forever.
	MaxBufferedBytes int64 `yaml:"-"`
	// Allocator allocates the Arrow batch buffers. Default: a pooling
	// allocator private to the builder (its memory is not zeroed).
	Allocator memory.Allocator `yaml:"-"`
	// LateWindow is how many recently emitted event ids (timeslice
	// indices) the builder remembers exactly for late detection (about 48
	// bytes each, at most MaxLateWindow); a fragment for an id below all of
	// them is late too.
	LateWindow uint64 `yaml:"-"`
	// Assigned (farm builder unit, event mode): the builder builds only
	// the event ids of the assignments given to Expect and tracks
	// completeness per assignment instead of the reference and the late
	// window; see the package doc, "Farm assignments".
	Assigned bool `yaml:"-"`
	// OnAssignmentDone, with Assigned, is called once per assignment when
	// it is done: every event of it was delivered on Batches(), or it was
	// idle for Timeout, or the builder closed. It runs on the builder's
	// own goroutine, outside its lock, and must not block for long.
	OnAssignmentDone func(AssignmentReport) `yaml:"-"`
	// Logger receives a record for each counter reset and for each
	// suspect event discarded. Default: none (the Ledger still counts).
	Logger *slog.Logger `yaml:"-"`
}

// Defaults are the values New gives zero Config fields, and the defaults of
// the builder section.
func Defaults() Config {
	return Config{
		Mode:             schemas.ModeEvent,
		Timeout:          time.Second,
		BehindWait:       5 * time.Second,
		MaxOpenEvents:    4096,
		BatchEvents:      256,
		BatchLatency:     50 * time.Millisecond,
		MaxBufferedBytes: 256 << 20,
		LateWindow:       1 << 16,
		MaxSuspectEvents: 256,
	}
}

// Validate checks the settings of the builder section as written (a zero
// duration is not taken for its default here) and returns its problems,
// with paths relative to the section ("mode", "slice_duration").
func (cfg Config) Validate() conf.Problems {
	var ps conf.Problems
	switch cfg.Mode {
	case schemas.ModeEvent:
	case schemas.ModeTimeslice:
		if cfg.SliceDuration <= 0 {
			ps.Add("slice_duration", cfg.SliceDuration, "want a positive slice length in timeslice mode, e.g. 10ms")
		}
		if cfg.Overlap < 0 || (cfg.Overlap > 0 && cfg.Overlap >= cfg.SliceDuration) {
			ps.Add("overlap", cfg.Overlap, "want 0 <= overlap < slice_duration (%s)", cfg.SliceDuration)
		}
	default:
		ps.Add("mode", cfg.Mode, "want %s or %s", schemas.ModeEvent, schemas.ModeTimeslice)
	}
	if cfg.Timeout <= 0 {
		ps.Add("timeout", cfg.Timeout, "want a positive duration such as 1s")
	}
	if cfg.MaxOpenEvents < 1 {
		ps.Add("max_open_events", cfg.MaxOpenEvents, "want >= 1")
	}
	if cfg.BatchEvents < 1 || cfg.BatchEvents > MaxBatchEvents {
		ps.Add("batch_events", cfg.BatchEvents, "want 1..%d events per batch", MaxBatchEvents)
	}
	if cfg.BatchLatency <= 0 {
		ps.Add("batch_latency", cfg.BatchLatency, "want a positive duration such as 50ms")
	}
	if cfg.SuspectDistance != 0 && cfg.MaxOpenEvents >= 1 && cfg.SuspectDistance < uint64(cfg.MaxOpenEvents) {
		ps.Add("suspect_distance", cfg.SuspectDistance, "want at least max_open_events (%d): sources legitimately run that many event ids apart", cfg.MaxOpenEvents)
	}
	if cfg.MaxSuspectEvents < 1 || cfg.MaxSuspectEvents > 1<<20 {
		ps.Add("max_suspect_events", cfg.MaxSuspectEvents, "want 1..%d events", 1<<20)
	}
	if cfg.Quorum < 0 {
		ps.Add("quorum", cfg.Quorum, "want 0 (more than half of the expected sources) or a number of sources")
	}
	return ps
}

// withDefaults returns cfg with defaults filled in, or an error wrapping
// ErrConfig that names the offending fields.
func (cfg Config) withDefaults() (Config, error) {
	bad := func(field, format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("%w: %s: %s", ErrConfig, field, fmt.Sprintf(format, args...))
	}
	d := Defaults()
	if cfg.Mode == "" {
		cfg.Mode = d.Mode
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = d.Timeout
	}
	if cfg.BehindWait == 0 {
		cfg.BehindWait = d.BehindWait
	}
	if cfg.MaxOpenEvents == 0 {
		cfg.MaxOpenEvents = d.MaxOpenEvents
	}
	if cfg.BatchEvents == 0 {
		cfg.BatchEvents = d.BatchEvents
	}
	if cfg.BatchLatency == 0 {
		cfg.BatchLatency = d.BatchLatency
	}
	if cfg.MaxBufferedBytes == 0 {
		cfg.MaxBufferedBytes = d.MaxBufferedBytes
	}
	if cfg.LateWindow == 0 {
		cfg.LateWindow = d.LateWindow
	}
	if cfg.MaxSuspectEvents == 0 {
		cfg.MaxSuspectEvents = d.MaxSuspectEvents
	}
	if ps := cfg.Validate(); len(ps) > 0 {
		return Config{}, fmt.Errorf("%w: %s", ErrConfig, ps)
	}
	if cfg.SuspectDistance == 0 {
		cfg.SuspectDistance = 16 * uint64(cfg.MaxOpenEvents)
	}
	n := 0
	seen := map[uint32]string{}
	for gi, g := range cfg.Groups {
		for _, s := range g.Sources {
			if prev, dup := seen[s]; dup {
				return bad(fmt.Sprintf("Groups[%d].Sources", gi), "source %d already in group %q", s, prev)
			}
			seen[s] = g.Name
			n++
		}
	}
	if n == 0 {
		return bad("Groups", "no expected source")
	}
	if cfg.Quorum > n {
		return bad("Quorum", "%d is more than the %d expected sources", cfg.Quorum, n)
	}
	if cfg.Assigned && cfg.Mode != schemas.ModeEvent {
		return bad("Assigned", "assignments are of event ids: want mode %s, not %s", schemas.ModeEvent, cfg.Mode)
	}
	cfg.Groups = schemas.SortGroups(cfg.Groups)
	if cfg.MaxBufferedBytes < 0 {
		return bad("MaxBufferedBytes", "negative (%d)", cfg.MaxBufferedBytes)
	}
	if cfg.LateWindow > MaxLateWindow {
		return bad("LateWindow", "%d is above %d (about 48 bytes each)", cfg.LateWindow, MaxLateWindow)
	}
	if cfg.Allocator == nil {
		cfg.Allocator = newPoolAllocator()
	}
	return cfg, nil
}
