package builder

import (
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/sluice-daq/sluice/schemas"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultTimeout          = time.Second
	DefaultMaxOpenEvents    = 4096
	DefaultMaxBufferedBytes = 256 << 20
	DefaultBatchEvents      = 256
	DefaultBatchLatency     = 50 * time.Millisecond
	DefaultLateWindow       = 1 << 16
	MaxLateWindow           = 1 << 24
)

// Config configures a Builder. Zero values take the defaults above.
type Config struct {
	// Mode is schemas.ModeEvent (the default) or schemas.ModeTimeslice.
	Mode schemas.Mode
	// Groups are the expected sources, grouped; each group becomes one
	// payload column. At least one source; source ids unique across groups.
	// Any order is accepted: New sorts each group's sources ascending, the
	// payload order of event batches (schemas.EventSchema).
	Groups []schemas.SourceGroup
	// Run is written in the run column of every row.
	Run uint32
	// Timeout: an event still incomplete this long after its first
	// fragment arrived is emitted incomplete.
	Timeout time.Duration
	// SliceDuration is the timeslice length in ns (timeslice mode only); a
	// fragment's EventID is then its timestamp in ns.
	SliceDuration uint64
	// Overlap is how many ns after a timeslice's end a fragment is also
	// given to that timeslice (timeslice mode only; < SliceDuration).
	Overlap uint64
	// MaxOpenEvents bounds the events held by the builder: under
	// construction plus emitted but not yet in a delivered batch.
	MaxOpenEvents int
	// MaxBufferedBytes bounds the payload bytes referenced by held events.
	// A single fragment larger than the bound is still accepted when
	// nothing else is held, so that it cannot block forever.
	MaxBufferedBytes int64
	// BatchEvents closes a batch at this many events.
	BatchEvents int
	// BatchLatency closes a batch this long after its first event.
	BatchLatency time.Duration
	// Allocator allocates the Arrow batch buffers. Default: a pooling
	// allocator private to the builder (its memory is not zeroed).
	Allocator memory.Allocator
	// LateWindow is how many recently emitted event ids (timeslice
	// indices) the builder remembers exactly for late detection (about 48
	// bytes each); a fragment for an id below all of them is late too.
	// Default 2^16.
	LateWindow uint64
}

// withDefaults returns cfg with defaults filled in, or an error wrapping
// ErrConfig that names the offending field.
func (cfg Config) withDefaults() (Config, error) {
	bad := func(field, format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("%w: %s: %s", ErrConfig, field, fmt.Sprintf(format, args...))
	}
	if cfg.Mode == "" {
		cfg.Mode = schemas.ModeEvent
	}
	if cfg.Mode != schemas.ModeEvent && cfg.Mode != schemas.ModeTimeslice {
		return bad("Mode", "%q is neither %q nor %q", cfg.Mode, schemas.ModeEvent, schemas.ModeTimeslice)
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
	cfg.Groups = schemas.SortGroups(cfg.Groups)
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Timeout < 0 {
		return bad("Timeout", "negative (%v)", cfg.Timeout)
	}
	if cfg.Mode == schemas.ModeTimeslice {
		if cfg.SliceDuration == 0 {
			return bad("SliceDuration", "must be > 0 ns in timeslice mode")
		}
		if cfg.Overlap >= cfg.SliceDuration {
			return bad("Overlap", "%d ns must be below SliceDuration (%d ns)", cfg.Overlap, cfg.SliceDuration)
		}
	}
	if cfg.MaxOpenEvents == 0 {
		cfg.MaxOpenEvents = DefaultMaxOpenEvents
	}
	if cfg.MaxOpenEvents < 0 {
		return bad("MaxOpenEvents", "negative (%d)", cfg.MaxOpenEvents)
	}
	if cfg.MaxBufferedBytes == 0 {
		cfg.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if cfg.MaxBufferedBytes < 0 {
		return bad("MaxBufferedBytes", "negative (%d)", cfg.MaxBufferedBytes)
	}
	if cfg.BatchEvents == 0 {
		cfg.BatchEvents = DefaultBatchEvents
	}
	if cfg.BatchEvents < 0 {
		return bad("BatchEvents", "negative (%d)", cfg.BatchEvents)
	}
	if cfg.BatchLatency == 0 {
		cfg.BatchLatency = DefaultBatchLatency
	}
	if cfg.BatchLatency < 0 {
		return bad("BatchLatency", "negative (%v)", cfg.BatchLatency)
	}
	if cfg.LateWindow == 0 {
		cfg.LateWindow = DefaultLateWindow
	}
	if cfg.LateWindow > MaxLateWindow {
		return bad("LateWindow", "%d is above %d (about 48 bytes each)", cfg.LateWindow, MaxLateWindow)
	}
	if cfg.Allocator == nil {
		cfg.Allocator = newPoolAllocator()
	}
	return cfg, nil
}
