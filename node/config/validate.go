package config

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/schemas"
)

// Validate checks c and returns an *Error listing every problem, or nil.
// It looks only at the configuration itself; Preflight checks the files it
// names.
func (c *Config) Validate() error {
	var ps conf.Problems
	c.validate(&ps)
	return errOf("", ps)
}

func (c *Config) validate(ps *conf.Problems) {
	if c.Node.ID == "" {
		ps.Add("node.id", nil, "want a node name (default: the host name, which could not be read)")
	}
	c.validateInputs(ps)
	c.validateSources(ps)
	c.validateBuilder(ps)
	*ps = append(*ps, c.Trigger.Validate().In("trigger")...)
	*ps = append(*ps, c.Store.Validate().In("store")...)
	c.validateReplay(ps)
	*ps = append(*ps, c.HTTP.Validate().In("http")...)
	if !oneOf(c.Log.Level, "debug", "info", "warn", "error") {
		ps.Add("log.level", c.Log.Level, "want one of debug, info, warn, error")
	}
	if !oneOf(c.Log.Format, "auto", "text", "json") {
		ps.Add("log.format", c.Log.Format, "want one of auto, text, json")
	}
	if c.Log.RateLimit < 0 {
		ps.Add("log.rate_limit", c.Log.RateLimit, "want >= 0 records per interval (0 = no limit)")
	}
	if c.Log.RateInterval <= 0 {
		ps.Add("log.rate_interval", c.Log.RateInterval, "want a positive duration such as 10s")
	}
}

func (c *Config) validateInputs(ps *conf.Problems) {
	if len(c.Inputs) == 0 {
		ps.Add("inputs", nil, "want at least one input (shm://NAME, tcp://HOST:PORT, udp://HOST:PORT or file://PATH)")
	}
	seen := map[string]int{}
	for i, in := range c.Inputs {
		p := fmt.Sprintf("inputs[%d]", i)
		scheme, _, err := ParseURI(in.URI)
		if err != nil {
			ps.Add(p+".uri", in.URI, "%v", err)
		}
		if j, dup := seen[in.URI]; dup && in.URI != "" {
			ps.Add(p+".uri", in.URI, "want each input once (also inputs[%d])", j)
		}
		seen[in.URI] = i
		if in.ReorderWindow < 1 || in.ReorderWindow > 1<<16 {
			ps.Add(p+".reorder_window", in.ReorderWindow, "want 1..65536 datagrams")
		}
		if in.LatencyBudget <= 0 {
			ps.Add(p+".latency_budget", in.LatencyBudget, "want a positive duration such as 20ms")
		}
		if in.CreditWindow < 64<<10 || in.CreditWindow > 1<<30 {
			ps.Add(p+".credit_window", in.CreditWindow, "want 64KiB..1GiB")
		}
		if in.SocketBuffer > 1<<30 {
			ps.Add(p+".socket_buffer", in.SocketBuffer, "want at most 1GiB")
		}
		if in.ExpectStreams < 0 || (in.ExpectStreams > 0 && scheme != "tcp" && scheme != "udp") {
			ps.Add(p+".expect_streams", in.ExpectStreams, "want 0, or a number of senders on a tcp:// or udp:// input")
		}
		if in.Emulator != nil {
			if scheme == "file" {
				ps.Add(p+".emulator", nil, "an emulator writes to shm://, tcp:// or udp://, not to a file:// input")
			}
			c.validateEmulator(ps, p+".emulator", in.Emulator)
		}
	}
}

// ParseURI splits an input URI into its scheme and address (ring name,
// HOST:PORT or file path), or says what is wrong with it.
func ParseURI(uri string) (scheme, addr string, err error) {
	u, perr := url.Parse(uri)
	if perr != nil || u.Scheme == "" {
		return "", "", fmt.Errorf("want shm://NAME, tcp://HOST:PORT, udp://HOST:PORT or file://PATH")
	}
	switch u.Scheme {
	case "shm":
		name := u.Host + u.Path
		if name == "" || strings.ContainsAny(name, "/\\") {
			return "", "", fmt.Errorf("want shm://NAME with a ring name without slashes")
		}
		return "shm", name, nil
	case "tcp", "udp":
		_, port, err := net.SplitHostPort(u.Host)
		if err != nil || u.Path != "" || !validPort(port, false) {
			return "", "", fmt.Errorf("want %s://HOST:PORT with a port 1..65535", u.Scheme)
		}
		for k, v := range u.Query() {
			if k != "format" || u.Scheme != "udp" || len(v) != 1 || (v[0] != "mfp" && v[0] != "vtp") {
				return "", "", fmt.Errorf("unknown option %s=%v: udp:// takes ?format=mfp or ?format=vtp, tcp:// no options", k, v)
			}
		}
		return u.Scheme, u.Host, nil
	case "file":
		path := u.Host + u.Path
		if path == "" {
			return "", "", fmt.Errorf("want file://PATH (file://./x for a relative path, file:///abs/x)")
		}
		return "file", path, nil
	}
	return "", "", fmt.Errorf("unknown scheme %q: want shm, tcp, udp or file", u.Scheme)
}

func (c *Config) validateEmulator(ps *conf.Problems, p string, e *Emulator) {
	if e.Loop < 1 {
		ps.Add(p+".loop", e.Loop, "want >= 1 passes over the file")
	}
	if e.Rate < 0 || math.IsNaN(e.Rate) || math.IsInf(e.Rate, 0) {
		ps.Add(p+".rate", e.Rate, "want events per second >= 0 (0 = as fast as the node takes them)")
	}
	if e.Duration < 0 {
		ps.Add(p+".duration", e.Duration, "want a duration >= 0")
	}
	if e.Packing < 1 || e.Packing > schemas.MaxPacking {
		ps.Add(p+".packing", e.Packing, "want 1..%d fragments per packet", schemas.MaxPacking)
	}
	if e.Sources != "" {
		if ids, err := schemas.ParseSourceList(e.Sources); err != nil {
			ps.Add(p+".sources", e.Sources, "%v", err)
		} else if len(ids) == 0 {
			ps.Add(p+".sources", e.Sources, "want at least one source id")
		}
	}
	if e.From == "" {
		sd := e.FragmentSize
		sp := p + ".fragment_size"
		switch sd.Dist {
		case "fixed":
		case "uniform":
			if sd.Max < sd.Min || sd.Max == 0 {
				ps.Add(sp+".max", sd.Max, "want a uniform upper bound > 0 and >= min (%s)", sd.Min)
			}
		case "lognormal":
			if sd.Sigma <= 0 || sd.Sigma > 5 {
				ps.Add(sp+".sigma", sd.Sigma, "want 0 < sigma <= 5")
			}
		default:
			ps.Add(sp+".dist", sd.Dist, "want one of fixed, uniform, lognormal")
		}
		if sd.Mean > 1<<20 || sd.Max > 1<<20 {
			ps.Add(sp, nil, "want sizes of at most 1MiB (the emulator's largest payload)")
		}
	} else if e.Events != 0 || e.Duration != 0 {
		ps.Add(p+".from", e.From, "file mode sends the file loop times: remove events/duration, or from for synthetic events")
	}
	f := e.Faults
	for _, x := range []struct {
		name string
		v    float64
	}{{"drop", f.Drop}, {"duplicate", f.Duplicate}, {"corrupt", f.Corrupt}, {"truncate", f.Truncate}, {"reorder", f.Reorder}, {"stall", f.Stall}} {
		if !(x.v >= 0 && x.v <= 1) {
			ps.Add(p+".faults."+x.name, x.v, "want a probability in [0, 1]")
		}
	}
	if s := f.Drop + f.Duplicate + f.Corrupt + f.Truncate; s > 1 {
		ps.Add(p+".faults", nil, "want drop + duplicate + corrupt + truncate <= 1 (they exclude each other), got %v", s)
	}
	if f.ReorderWindow < 1 || f.ReorderWindow > 1<<16 {
		ps.Add(p+".faults.reorder_window", f.ReorderWindow, "want 1..65536 packets")
	}
	if f.StallDuration < 0 {
		ps.Add(p+".faults.stall_duration", f.StallDuration, "want a duration >= 0")
	}
	if e.Connections < 0 || e.Connections > 1024 {
		ps.Add(p+".connections", e.Connections, "want 0 (default) .. 1024 TCP connections")
	}
	if e.RingSize < 1<<20 || e.RingSize > 1<<36 || e.RingSize&(e.RingSize-1) != 0 {
		ps.Add(p+".ring_size", e.RingSize, "want a power of two between 1MiB and 64GiB")
	}
}

func (c *Config) validateSources(ps *conf.Problems) {
	if len(c.Sources) == 0 {
		ps.Add("sources", nil, "want at least one source group (name + source list such as \"0-511,600\")")
	}
	names := map[string]int{}
	owner := map[uint32]int{}
	for i, g := range c.Sources {
		p := fmt.Sprintf("sources[%d]", i)
		if !conf.ValidName(g.Name) {
			ps.Add(p+".name", g.Name, conf.NameWant)
		} else if j, dup := names[g.Name]; dup {
			ps.Add(p+".name", g.Name, "want a unique group name (also sources[%d])", j)
		}
		names[g.Name] = i
		ids, err := schemas.ParseSourceList(g.Sources)
		switch {
		case err != nil:
			ps.Add(p+".sources", g.Sources, "%v", err)
		case len(ids) == 0:
			ps.Add(p+".sources", g.Sources, "want at least one source id, e.g. \"0-511,600\"")
		}
		for _, id := range ids {
			if j, dup := owner[id]; dup {
				ps.Add(p+".sources", g.Sources, "want each source in one group only: source %d is also in sources[%d]", id, j)
				break
			}
			owner[id] = i
		}
	}
}

func (c *Config) validateBuilder(ps *conf.Problems) {
	b := c.Builder
	*ps = append(*ps, b.Config.Validate().In("builder")...)
	if b.MemoryBudget < 4<<20 {
		ps.Add("builder.memory_budget", b.MemoryBudget, "want at least 4MiB")
	}
	if b.QueueBatches < 1 || b.QueueBatches > 1024 {
		ps.Add("builder.queue_batches", b.QueueBatches, "want 1..1024 batches")
	}
}

func (c *Config) validateReplay(ps *conf.Problems) {
	r := c.Replay
	*ps = append(*ps, c.Trigger.ValidateReplay(r.Stages).In("replay.stages")...)
	if r.Rate < 0 || math.IsNaN(r.Rate) || math.IsInf(r.Rate, 0) {
		ps.Add("replay.rate", r.Rate, "want events per second >= 0 (0 = unlimited)")
	}
	if r.InterFill < 0 {
		ps.Add("replay.inter_fill", r.InterFill, "want an idle time >= 0 (0 = no inter-fill replay)")
	}
	if r.BatchEvents < 1 || r.BatchEvents > 1<<20 {
		ps.Add("replay.batch_events", r.BatchEvents, "want 1..1048576 events per batch")
	}
}

// Preflight checks what the configuration refers to on this machine: the
// plugin binaries are executable files, emulator input files exist, and the
// store directory can be created. It returns an *Error listing every
// problem. `sluice run` calls it after Validate, before opening any input.
func (c *Config) Preflight() error {
	var ps conf.Problems
	ps = append(ps, c.Trigger.Preflight().In("trigger")...)
	for i, in := range c.Inputs {
		if in.Emulator != nil && in.Emulator.From != "" {
			if _, err := os.Stat(in.Emulator.From); err != nil {
				ps.Add(fmt.Sprintf("inputs[%d].emulator.from", i), in.Emulator.From, "want an existing file (%v)", unwrapPath(err))
			}
		}
		if scheme, addr, err := ParseURI(in.URI); err == nil && scheme == "file" {
			if _, err := os.Stat(addr); err != nil {
				ps.Add(fmt.Sprintf("inputs[%d].uri", i), in.URI, "want an existing file (%v)", unwrapPath(err))
			}
		}
	}
	ps = append(ps, c.Store.Preflight().In("store")...)
	ps = append(ps, c.HTTP.Preflight().In("http")...)
	return errOf("", ps)
}

func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

func validPort(p string, zeroOK bool) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n <= 65535 && (n >= 1 || (zeroOK && n == 0))
}

func oneOf(v string, set ...string) bool {
	for _, s := range set {
		if v == s {
			return true
		}
	}
	return false
}
