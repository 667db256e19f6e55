package fill

import (
	"fmt"
	"math"
	"net/url"
	"os"
	"time"

	"github.com/sluice-daq/sluice/internal/conf"
)

// Config is the fill section of a node's configuration (`fill:`): where
// the accelerator's state comes from (one of Schedule, URL, EtcdKey; none:
// no fill-aware deferral) and the bounds of the plan.
type Config struct {
	Schedule string `yaml:"schedule"` // a schedule file (ScheduleFile)
	URL      string `yaml:"url"`      // an HTTP endpoint answering a Document
	EtcdKey  string `yaml:"etcd_key"` // an etcd key holding a Document or a bare mode
	// Etcd are the endpoints for EtcdKey (empty: the farm section's).
	Etcd []string `yaml:"etcd"`
	// Poll is how often the state is read and the plan made again.
	Poll time.Duration `yaml:"poll"`
	// Timeout bounds each read of an HTTP or etcd source.
	Timeout time.Duration `yaml:"timeout"`
	// Stage is the online stage whose deferral fraction the plan sets
	// ("": the first online stage).
	Stage string `yaml:"stage"`
	// MinFraction and MaxFraction bound the planned fraction (0..1).
	MinFraction float64 `yaml:"min_fraction"`
	MaxFraction float64 `yaml:"max_fraction"`
	// Safety is the share of the expected inter-fill the plan fills with
	// replay (the rest is margin: a late replay start, a slower replay).
	Safety float64 `yaml:"safety"`
	// StoreShare is the share of the store's headroom (its disk budget
	// left), and of MaxBacklogBytes, the plan lets the deferred backlog
	// take: the rest is margin for an event rate above its estimate.
	StoreShare float64 `yaml:"store_share"`
	// MaxBacklogBytes caps the deferred stream's bytes (0: only the
	// store's budget); the plan aims at StoreShare of it.
	MaxBacklogBytes conf.ByteSize `yaml:"max_backlog_bytes"`
	// ExpectedFill and ExpectedInterFill are the lengths assumed when the
	// source does not say when the current fill or inter-fill ends.
	ExpectedFill      time.Duration `yaml:"expected_fill"`
	ExpectedInterFill time.Duration `yaml:"expected_inter_fill"`
}

// DefaultConfig is the section's defaults (no source: off).
func DefaultConfig() Config {
	return Config{Poll: time.Second, Timeout: 2 * time.Second, MinFraction: 0, MaxFraction: 0.9, Safety: 0.8,
		StoreShare: 0.8, ExpectedFill: 10 * time.Hour, ExpectedInterFill: 2 * time.Hour}
}

// Enabled says whether a source is configured.
func (c Config) Enabled() bool { return c.Schedule != "" || c.URL != "" || c.EtcdKey != "" }

// Validate checks the section; problem paths are relative to it. It reads
// no file: Preflight does.
func (c Config) Validate() conf.Problems {
	var ps conf.Problems
	n := 0
	for _, s := range []string{c.Schedule, c.URL, c.EtcdKey} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		ps.Add("schedule", nil, "want one accelerator state source: schedule, url or etcd_key, not %d of them", n)
	}
	if !c.Enabled() {
		return ps
	}
	if c.URL != "" {
		if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			ps.Add("url", c.URL, "want an http:// or https:// URL answering the state as JSON")
		}
	}
	if c.EtcdKey != "" && len(c.Etcd) == 0 {
		ps.Add("etcd", nil, "want the etcd endpoints holding etcd_key (or farm.etcd)")
	}
	if c.Poll <= 0 {
		ps.Add("poll", c.Poll, "want a positive duration such as 1s")
	}
	if c.Timeout <= 0 {
		ps.Add("timeout", c.Timeout, "want a positive duration such as 2s")
	}
	frac := func(key string, v float64, lowOpen bool) {
		if math.IsNaN(v) || v < 0 || v > 1 || (lowOpen && v == 0) {
			want := "want a fraction 0..1"
			if lowOpen {
				want = "want a fraction above 0, at most 1"
			}
			ps.Add(key, v, "%s", want)
		}
	}
	frac("min_fraction", c.MinFraction, false)
	frac("max_fraction", c.MaxFraction, false)
	if c.MinFraction > c.MaxFraction {
		ps.Add("min_fraction", c.MinFraction, "want at most max_fraction (%v)", c.MaxFraction)
	}
	frac("safety", c.Safety, true)
	frac("store_share", c.StoreShare, true)
	if c.ExpectedFill <= 0 {
		ps.Add("expected_fill", c.ExpectedFill, "want a positive duration such as 10h")
	}
	if c.ExpectedInterFill <= 0 {
		ps.Add("expected_inter_fill", c.ExpectedInterFill, "want a positive duration such as 2h")
	}
	return ps
}

// Preflight reads the schedule file, if one is configured, and reports
// why it cannot be used.
func (c Config) Preflight() conf.Problems {
	var ps conf.Problems
	if c.Schedule == "" {
		return ps
	}
	b, err := os.ReadFile(c.Schedule)
	if err != nil {
		ps.Add("schedule", c.Schedule, "want a readable schedule file: %v", unwrapPath(err))
		return ps
	}
	if _, err := ParseSchedule(b); err != nil {
		ps.Add("schedule", c.Schedule, "want a valid schedule file: %v", err)
	}
	return ps
}

func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// Open opens the configured source (nil when none is configured).
func (c Config) Open() (Source, error) {
	switch {
	case c.Schedule != "":
		return OpenSchedule(c.Schedule)
	case c.URL != "":
		return NewHTTP(c.URL, c.Timeout), nil
	case c.EtcdKey != "":
		return NewEtcd(c.Etcd, c.EtcdKey, c.Timeout)
	}
	return nil, fmt.Errorf("fill: no accelerator state source configured")
}
