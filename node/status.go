package node

import (
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Status is what GET /status returns and what the metrics are read from:
// one consistent snapshot of the node.
type Status struct {
	Node          string         `json:"node"`
	State         State          `json:"state"`
	Run           uint32         `json:"run"`
	UptimeSeconds float64        `json:"uptime_seconds"`
	Rates         Rates          `json:"rates"`
	Buffers       Buffers        `json:"buffers"`
	Inputs        []InputStatus  `json:"inputs"`
	Plugins       []PluginStatus `json:"plugins"`
	Store         StoreStatus    `json:"store"`
	Replay        ReplayStatus   `json:"replay"`
	// Fill is fill-aware deferral's plan (nil: no fill source configured).
	Fill          *FillStatus `json:"fill,omitempty"`
	LogSuppressed uint64      `json:"log_records_suppressed"`
	// Warnings are the sources reported silent and the last interval's
	// warnings (see config.Warnings).
	Warnings WarningStatus `json:"warnings"`
	// Latency is each latency histogram's count, p50 and p99 (seconds).
	Latency []LatencyStatus `json:"latency"`
	// Farm is the node's part in a farm (nil: it runs alone).
	Farm   *FarmStatus `json:"farm,omitempty"`
	Ledger Ledger      `json:"ledger"`
	// PathsHidden: the file paths (store, plugins, file inputs) are left
	// out, as on an HTTP endpoint off loopback without http.show_paths.
	PathsHidden bool `json:"paths_hidden,omitempty"`
}

// Rates are per-second averages over the last sampling interval (~1 s).
type Rates struct {
	FragmentsPerSecond float64 `json:"fragments_per_second"`
	EventsPerSecond    float64 `json:"events_per_second"`
	BytesPerSecond     float64 `json:"bytes_per_second"`
	AcceptedPerSecond  float64 `json:"accepted_per_second"`
	StoredPerSecond    float64 `json:"stored_per_second"`
}

// Buffers is the occupancy of the bounded stages between the inputs and
// the store.
type Buffers struct {
	QueueBatches      int    `json:"queue_batches"`          // batches waiting for the trigger chain
	QueueCapacity     int    `json:"queue_capacity_batches"` // bound of that queue
	QueueBytes        int64  `json:"queue_bytes"`            // payload bytes of those batches
	MemoryBudgetBytes uint64 `json:"memory_budget_bytes"`
}

// InputStatus is one readout input.
type InputStatus struct {
	URI string `json:"uri"`
	// Address is where a network input listens (the port chosen for
	// port 0); "" for rings and files.
	Address     string  `json:"address,omitempty"`
	Packets     uint64  `json:"packets"`
	Bytes       uint64  `json:"bytes"`
	IdleSeconds float64 `json:"idle_seconds"` // since the last packet
	// BackpressureSeconds is the wall-clock time the input spent waiting
	// for the builder to take its packets, at least one of its connections
	// waiting (its senders throttled meanwhile).
	BackpressureSeconds float64 `json:"backpressure_seconds"`
	Done                bool    `json:"done"` // a finite input that reached its end
	// Network inputs: connections open now, connections refused by
	// reason (tcp: "max_connections", present at 0 until one is; peer:
	// the hello's "farm", "token", "version", "node", "accept_queue",
	// "malformed"), and accept(2) failures survived by reason ("emfile":
	// out of file descriptors; see transport.Stats).
	Open    int64             `json:"connections_open,omitempty"`
	Refused map[string]uint64 `json:"connections_refused,omitempty"`
	// ConnectionsByVersion: a TCP input, the streams it accepted by their
	// readout stream version (1, 2; JSON keys "1", "2").
	ConnectionsByVersion map[int]uint64 `json:"connections_by_version,omitempty"`
	// Streams a network input waits for (expect_streams) and those that
	// ended cleanly: with connections_open, whether every board connected
	// (0 expected: the input ends only when the run is stopped).
	StreamsExpected int               `json:"streams_expected,omitempty"`
	StreamsEnded    uint64            `json:"streams_ended,omitempty"`
	AcceptErrors    map[string]uint64 `json:"accept_errors,omitempty"`
	// ConnectionsClosed: tcp inputs, every connection accepted and since
	// closed, by reason (preamble_timeout, eof_before_preamble,
	// eof_in_preamble, bad_preamble, end_of_stream, peer_closed,
	// read_error, truncated, protocol, sink_error, shutdown; see the tcp
	// package's Closed* constants), each at 0 until one occurs.
	ConnectionsClosed map[string]uint64 `json:"connections_closed,omitempty"`
	// StreamsLost: peer inputs, senders lost without a complete goodbye,
	// by reason (reset, heartbeat, protocol): what they had in flight
	// never arrived and is in no other counter.
	StreamsLost map[string]uint64 `json:"streams_lost,omitempty"`
	// Flagged counts fragments the input handed on flagged as a source
	// error, by reason (a FEROL input: "fed_crc", "fed_error_bits",
	// "fed_header_mismatch"; see transport.Stats.Flagged).
	Flagged map[string]uint64 `json:"fragments_flagged,omitempty"`
}

// PluginStatus is one trigger stage's plugin processes.
type PluginStatus struct {
	Stage string `json:"stage"`
	// Plugin is the name the plugin gives itself (its Describe), as the
	// metrics' plugin label; Binary the file it runs from.
	Plugin    string `json:"plugin"`
	Binary    string `json:"binary"`
	Instances int    `json:"instances"`
	Up        int    `json:"up"`
	Restarts  uint64 `json:"restarts"`
	Backlog   int    `json:"backlog_events"` // events waiting for a free instance
	Calls     uint64 `json:"calls"`          // batches the stage's plugins decided
	// Shadow is the stage's shadow plugin and how its decisions compare
	// with the stage's (nil: the stage has none).
	Shadow *ShadowStatus `json:"shadow,omitempty"`
}

// ShadowStatus is a stage's shadow (canary) plugin: its processes, and its
// decisions compared with the production plugin's on the same events.
type ShadowStatus struct {
	Plugin    string `json:"plugin"`  // the name it gives itself
	Version   string `json:"version"` // the version it gives itself
	Binary    string `json:"binary"`
	Instances int    `json:"instances"`
	Up        int    `json:"up"`
	Restarts  uint64 `json:"restarts"`
	Compared  uint64 `json:"compared_events"`
	Agreeing  uint64 `json:"agreeing_events"`
	Differing uint64 `json:"differing_events"`
	// ByDecision counts the differing events by "production/shadow"
	// decision (e.g. "accept/reject"; "accept/accept": other lines).
	ByDecision map[string]uint64 `json:"differing_by_decision,omitempty"`
	// ByLine counts, per line, the events it fired on for one side only.
	ByLine []ShadowLineStatus `json:"differing_by_line,omitempty"`
	// Sample holds the latest differing event ids (at most
	// plugins.ShadowSample), oldest first.
	Sample []uint64 `json:"differing_sample,omitempty"`
	// Skipped counts the events not compared, by reason (queue_full: the
	// shadow was behind; failed: it crashed, passed its deadline or
	// returned an error; production_failed: the stage's plugin failed on
	// the batch; stopped; released: the node stored the batch before the
	// shadow had decided it).
	Skipped map[string]uint64 `json:"skipped_events,omitempty"`
	// Stored and StoredBytes are the differing events written to the
	// store's shadow stream and their payload bytes (shadow.store_bytes);
	// Unstored the differing events not written, by reason (budget_full,
	// store_error).
	Stored      uint64            `json:"stored_events,omitempty"`
	StoredBytes uint64            `json:"stored_bytes,omitempty"`
	Unstored    map[string]uint64 `json:"unstored_events,omitempty"`
}

// ShadowLineStatus is one trigger line's differing events.
type ShadowLineStatus struct {
	Line           string `json:"line"`
	OnlyProduction uint64 `json:"only_production"`
	OnlyShadow     uint64 `json:"only_shadow"`
}

// StoreStatus is the event store's state.
type StoreStatus struct {
	Path          string `json:"path,omitempty"` // store directory; "" when paths are hidden
	HeadroomBytes int64  `json:"headroom_bytes"` // bytes writable before the disk budget refuses writes
	Writable      bool   `json:"writable"`
	// DeferredBacklog is the number of events waiting in the deferred
	// stream: those there at the start, plus deferred by this run, minus
	// those inter-fill replay removed.
	DeferredBacklog uint64 `json:"deferred_backlog_events"`
	// RunEventsAtStart is the number of events of this run number the store
	// already held when the run started; events with the same ids replace
	// them (counted in the ledger's events_replaced).
	RunEventsAtStart uint64 `json:"run_events_at_start"`
	// Warning says why RunEventsAtStart matters, when it is not 0.
	Warning string `json:"warning,omitempty"`
}

// ReplayStatus is inter-fill replay inside `sluice run`.
type ReplayStatus struct {
	Enabled  bool   `json:"enabled"`
	Active   bool   `json:"active"`
	Passes   uint64 `json:"passes"`   // times replay was started
	Events   uint64 `json:"events"`   // deferred events decided by replay in this run
	Accepted uint64 `json:"accepted"` // of which accepted
	Kept     uint64 `json:"kept"`     // of which kept deferred
	// Plugins are the replay chain's stages while it is open (it starts
	// with the first pass and closes when the run drains).
	Plugins []PluginStatus `json:"plugins,omitempty"`
}

// rateMeter turns cumulative counters into per-second rates, sampled at
// most once per minInterval so that frequent /status calls and scrapes see
// stable figures.
type rateMeter struct {
	mu       sync.Mutex
	last     time.Time
	prev     [5]uint64
	rates    Rates
	measured bool // rates were computed once
}

const minRateInterval = 500 * time.Millisecond

// update returns the rates over the interval since the last update at
// least minRateInterval ago. The first interval starts when the inputs
// opened (start; the counters were 0 then), so the first rates are right
// whenever /status is first read, not 0 or a burst over a short gap.
func (m *rateMeter) update(now, start time.Time, l *Ledger) Rates {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := [5]uint64{l.FragmentsReceived, l.EventsBuilt, l.BytesReceived, l.EventsAccepted, l.EventsStored}
	if m.last.IsZero() {
		if start.IsZero() {
			return m.rates // not running yet: nothing to measure
		}
		m.last = start
	}
	dt := now.Sub(m.last).Seconds()
	if dt <= 0 || (m.measured && dt < minRateInterval.Seconds()) {
		return m.rates
	}
	m.measured = true
	r := func(i int) float64 { return float64(cur[i]-m.prev[i]) / dt }
	m.rates = Rates{FragmentsPerSecond: r(0), EventsPerSecond: r(1), BytesPerSecond: r(2), AcceptedPerSecond: r(3), StoredPerSecond: r(4)}
	m.last, m.prev = now, cur
	return m.rates
}

// withoutPaths is s without the file paths it names, for an HTTP endpoint
// reachable from other machines: the store directory (and the warning that
// names it), plugin binaries and file:// inputs reduced to their file
// names. PathsHidden says so. s itself is not changed.
func (s Status) withoutPaths() Status {
	s.PathsHidden = true
	if s.Store.Path != "" {
		s.Store.Warning = strings.ReplaceAll(s.Store.Warning, s.Store.Path, "(path hidden)")
		s.Store.Path = ""
	}
	for _, p := range []*[]PluginStatus{&s.Plugins, &s.Replay.Plugins} {
		*p = slices.Clone(*p)
		for i := range *p {
			(*p)[i].Binary = filepath.Base((*p)[i].Binary)
			if sh := (*p)[i].Shadow; sh != nil {
				c := *sh
				c.Binary = filepath.Base(c.Binary)
				(*p)[i].Shadow = &c
			}
		}
	}
	s.Inputs = slices.Clone(s.Inputs)
	for i := range s.Inputs {
		s.Inputs[i].URI = uriWithoutPath(s.Inputs[i].URI)
	}
	if len(s.Ledger.InputLosses) > 0 {
		m := make(map[string]uint64, len(s.Ledger.InputLosses))
		for k, v := range s.Ledger.InputLosses {
			in, reason := splitLossKey(k)
			m[uriWithoutPath(in)+"/"+reason] += v
		}
		s.Ledger.InputLosses = m
	}
	return s
}

// uriWithoutPath is a file:// input URI reduced to the file's name; other
// URIs (rings, listen addresses) name no file and are kept.
func uriWithoutPath(uri string) string {
	if p, ok := strings.CutPrefix(uri, "file://"); ok {
		return "file://" + filepath.Base(p)
	}
	return uri
}
