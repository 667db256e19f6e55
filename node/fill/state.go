package fill

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// State is what a source knows of the accelerator at one moment. Zero
// times are unknown; the planner then uses the configured expected
// lengths (Config.ExpectedFill, Config.ExpectedInterFill).
type State struct {
	Mode Mode   // "" when the source has no state (before a schedule's first entry)
	Fill uint32 // the LHC fill number (0: not given)
	// Since is when Mode began, Until when it is expected to end.
	Since, Until time.Time
	// NextFill is when the next STABLE BEAMS is expected to begin.
	NextFill time.Time
}

// Known says whether the source gave a mode.
func (s State) Known() bool { return s.Mode != modeUnknown }

// Source tells the accelerator's state. Implementations: a schedule file
// (OpenSchedule), an HTTP endpoint (NewHTTP), an etcd key (NewEtcd).
type Source interface {
	// State is the state at now. An error leaves the caller's last state
	// standing (and is reported); it never ends the run.
	State(ctx context.Context, now time.Time) (State, error)
	// Describe names the source for logs and /status ("schedule FILE",
	// "http URL", "etcd KEY").
	Describe() string
	Close() error
}

// Document is the JSON an HTTP endpoint returns and an etcd key holds:
// the current beam mode and, optionally, what is known of its timing.
// Times are RFC 3339.
//
//	{"mode": "STABLE BEAMS", "fill": 9876,
//	 "since": "2026-12-01T08:00:00Z", "until": "2026-12-01T20:00:00Z",
//	 "next_fill": "2026-12-01T22:30:00Z"}
//
// Only mode is required. An etcd value may also be the bare mode
// ("BEAM DUMP").
type Document struct {
	Mode     string     `json:"mode"`
	Fill     uint32     `json:"fill,omitempty"`
	Since    *time.Time `json:"since,omitempty"`
	Until    *time.Time `json:"until,omitempty"`
	NextFill *time.Time `json:"next_fill,omitempty"`
}

// parseDocument reads a Document (strictly: an unknown key is an error, so
// a misspelt "untill" is not silently ignored).
func parseDocument(b []byte) (State, error) {
	var d Document
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return State{}, fmt.Errorf("%w: %v", ErrSource, err)
	}
	m, err := ParseMode(d.Mode)
	if err != nil {
		return State{}, fmt.Errorf("%w: %w", ErrSource, err)
	}
	s := State{Mode: m, Fill: d.Fill}
	for _, t := range []struct {
		dst *time.Time
		src *time.Time
	}{{&s.Since, d.Since}, {&s.Until, d.Until}, {&s.NextFill, d.NextFill}} {
		if t.src != nil {
			*t.dst = *t.src
		}
	}
	return s, nil
}
