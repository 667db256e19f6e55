package emulator

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/node/transport"
	"github.com/sluice-daq/sluice/schemas"
)

// Config configures Run: `sluice readout`'s flags, and the emulator
// section of an input in a node's configuration (the YAML keys; the node
// sets To to the input's URI and Groups to its source groups). Zero values
// take the defaults noted (WithDefaults).
type Config struct {
	// To is the URI to send to, of any registered transport: shm://NAME,
	// tcp://HOST:PORT, udp://HOST:PORT[?format=vtp], file://PATH.
	To   string `yaml:"-"`
	From string `yaml:"from"` // file mode: a file of any format Formats names (gzipped or not); "" = synthetic

	Loop     int           `yaml:"loop"`     // file mode: replay the file this many times (default 1), event ids (and LHCb ODIN event numbers) shifted
	Events   uint64        `yaml:"events"`   // synthetic: events to generate (0: no limit, until Duration or until Run's context is done)
	Duration time.Duration `yaml:"duration"` // synthetic: stop generating after this long, at an event boundary: the last event is sent by every source (0: no limit)
	Rate     float64       `yaml:"rate"`     // events per second; 0 = as fast as the output takes them

	// SourceList are the source ids sent (a source list, "0-511,600"):
	// in file mode the file's packets of other sources are skipped (a
	// farm's readout unit replays its share of a sample); synthetic, they
	// are one group "emulated"; empty: Groups, whose names
	// choose the payload kind (calorimeter towers for ecal/hcal, muon
	// candidates for muon, ...); no Groups either: sources 0..Sources-1
	// (default 4) as one group "tracker".
	SourceList string                `yaml:"sources"`
	Groups     []schemas.SourceGroup `yaml:"-"`
	Sources    int                   `yaml:"-"`

	Packing      int      `yaml:"packing"`        // fragments per packet (default 1)
	FragmentSize SizeDist `yaml:"fragment_size"`  // synthetic payload sizes (default fixed 128 bytes)
	Faults       Faults   `yaml:"faults"`         // fault injection
	Seed         uint64   `yaml:"seed"`           // payload content and fault draws
	FirstEventID uint64   `yaml:"first_event_id"` // synthetic: event id of the first event

	// Sender are the settings of To's sender, made by its transport's
	// NewSenderOptions (nil: its defaults): e.g. the ring size of shm://,
	// the connections of tcp://. In a node's configuration their keys are
	// written in the emulator section too.
	Sender transport.SenderOptions `yaml:"-" json:"-"`

	// OnSources, in file mode, is called once the file is read, before
	// anything is sent, with the source ids it sends (sorted): a node
	// reports the configured sources the file lacks.
	OnSources func(ids []uint32) `yaml:"-" json:"-"`
}

// Faults are fault-injection probabilities per packet, in [0, 1]. Drop,
// Truncate, Corrupt and Duplicate exclude each other (their sum must be
// <= 1); Reorder and Stall apply independently.
type Faults struct {
	Drop      float64 `yaml:"drop"`      // the packet is not sent (UDP: its sequence number is skipped)
	Duplicate float64 `yaml:"duplicate"` // the packet is sent twice
	Corrupt   float64 `yaml:"corrupt"`   // one payload byte of one fragment is flipped after its CRC was computed
	Truncate  float64 `yaml:"truncate"`  // the packet is cut short (TCP: mid-packet disconnect and reconnect)
	Reorder   float64 `yaml:"reorder"`   // the packet is held back behind 1..ReorderWindow later packets
	Stall     float64 `yaml:"stall"`     // the packet's source stalls: it and the source's next packets wait StallDuration

	ReorderWindow int           `yaml:"reorder_window"` // packets (default 8)
	StallDuration time.Duration `yaml:"stall_duration"` // default 10ms
}

// SizeDist is a payload size distribution in bytes.
type SizeDist struct {
	Dist  string        `yaml:"dist"`  // "fixed" (default), "uniform" or "lognormal"
	Mean  conf.ByteSize `yaml:"mean"`  // fixed: the size; lognormal: the mean (default 128)
	Min   conf.ByteSize `yaml:"min"`   // uniform: lower bound
	Max   conf.ByteSize `yaml:"max"`   // uniform: upper bound
	Sigma float64       `yaml:"sigma"` // lognormal: sigma of log(size) (default 0.5)
}

// Size distribution kinds (SizeDist.Dist).
const (
	DistFixed     = "fixed"
	DistUniform   = "uniform"
	DistLognormal = "lognormal"
)

// WithDefaults returns c with its zero settings at their defaults: the
// ones Run applies and a node's configuration shows. Events and Duration
// have none: 0 is no limit (`sluice readout` sends 1000 events when given
// neither).
func (c Config) WithDefaults() Config {
	if c.Loop == 0 {
		c.Loop = 1
	}
	if c.Packing == 0 {
		c.Packing = 1
	}
	if c.FragmentSize.Dist == "" {
		c.FragmentSize.Dist = DistFixed
	}
	if c.FragmentSize.Mean == 0 {
		c.FragmentSize.Mean = 128
	}
	if c.FragmentSize.Sigma == 0 {
		c.FragmentSize.Sigma = 0.5
	}
	if c.Faults.ReorderWindow == 0 {
		c.Faults.ReorderWindow = 8
	}
	if c.Faults.StallDuration == 0 {
		c.Faults.StallDuration = 10 * time.Millisecond
	}
	return c
}

// Validate checks the settings (after WithDefaults) and returns their
// problems, with paths relative to the emulator section ("faults.drop").
// Run refuses a Config with any.
func (c Config) Validate() conf.Problems {
	var ps conf.Problems
	if c.Loop < 1 {
		ps.Add("loop", c.Loop, "want >= 1 passes over the file")
	}
	if c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0) {
		ps.Add("rate", c.Rate, "want events per second >= 0 (0 = as fast as the receiver takes them)")
	}
	if c.Duration < 0 {
		ps.Add("duration", c.Duration, "want a duration >= 0")
	}
	if c.Packing < 1 || c.Packing > schemas.MaxPacking {
		ps.Add("packing", c.Packing, "want 1..%d fragments per packet", schemas.MaxPacking)
	}
	if c.SourceList != "" {
		if rs, err := schemas.ParseSourceRanges(c.SourceList); err != nil {
			ps.Add("sources", c.SourceList, "%v", err)
		} else if len(rs) == 0 {
			ps.Add("sources", c.SourceList, "want at least one source id")
		}
	}
	if c.From == "" {
		sd := c.FragmentSize
		switch sd.Dist {
		case DistFixed:
		case DistUniform:
			if sd.Max < sd.Min || sd.Max == 0 {
				ps.Add("fragment_size.max", sd.Max, "want a uniform upper bound > 0 and >= min (%s)", sd.Min)
			}
		case DistLognormal:
			if sd.Sigma <= 0 || sd.Sigma > 5 {
				ps.Add("fragment_size.sigma", sd.Sigma, "want 0 < sigma <= 5")
			}
		default:
			ps.Add("fragment_size.dist", sd.Dist, "want one of fixed, uniform, lognormal")
		}
		if sd.Mean > maxPayload || sd.Max > maxPayload {
			ps.Add("fragment_size", nil, "want sizes of at most 1MiB (the emulator's largest payload)")
		}
	} else if c.Events != 0 || c.Duration != 0 {
		ps.Add("from", c.From, "file mode sends the file loop times: remove events/duration, or from for synthetic events")
	}
	f := c.Faults
	for _, x := range []struct {
		name string
		v    float64
	}{{"drop", f.Drop}, {"duplicate", f.Duplicate}, {"corrupt", f.Corrupt}, {"truncate", f.Truncate}, {"reorder", f.Reorder}, {"stall", f.Stall}} {
		if !(x.v >= 0 && x.v <= 1) {
			ps.Add("faults."+x.name, x.v, "want a probability in [0, 1]")
		}
	}
	if s := f.Drop + f.Duplicate + f.Corrupt + f.Truncate; s > 1 {
		ps.Add("faults", nil, "want drop + duplicate + corrupt + truncate <= 1 (they exclude each other), got %v", s)
	}
	if f.ReorderWindow < 1 || f.ReorderWindow > 1<<16 {
		ps.Add("faults.reorder_window", f.ReorderWindow, "want 1..65536 packets")
	}
	if f.StallDuration < 0 {
		ps.Add("faults.stall_duration", f.StallDuration, "want a duration >= 0")
	}
	return ps
}

// ParseSizeDist parses fixed:N, uniform:MIN,MAX or lognormal:MEAN,SIGMA
// (sizes in whole bytes, N and MEAN > 0, MEAN the distribution's mean,
// SIGMA that of log(size), 0 < SIGMA <= 5).
func ParseSizeDist(s string) (SizeDist, error) {
	kind, args, _ := strings.Cut(s, ":")
	bad := func() (SizeDist, error) {
		return SizeDist{}, fmt.Errorf("size distribution %q: want fixed:N (N > 0), uniform:MIN,MAX (MIN <= MAX) or lognormal:MEAN,SIGMA (MEAN > 0, 0 < SIGMA <= 5), sizes in whole bytes", s)
	}
	v := strings.Split(args, ",")
	size := func(a string) (conf.ByteSize, bool) {
		n, err := strconv.ParseUint(strings.TrimSpace(a), 10, 64)
		return conf.ByteSize(n), err == nil
	}
	d := SizeDist{Dist: kind}
	var ok1, ok2 bool
	switch kind {
	case DistFixed:
		d.Mean, ok1 = size(v[0])
		ok2 = len(v) == 1 && d.Mean > 0 // 0 would mean the default size
	case DistUniform:
		if len(v) == 2 {
			d.Min, ok1 = size(v[0])
			d.Max, ok2 = size(v[1])
			ok2 = ok2 && d.Min <= d.Max
		}
	case DistLognormal:
		if len(v) == 2 {
			d.Mean, ok1 = size(v[0])
			sigma, err := strconv.ParseFloat(strings.TrimSpace(v[1]), 64)
			d.Sigma, ok2 = sigma, err == nil && sigma > 0 && sigma <= 5 && d.Mean > 0
		}
	}
	if !ok1 || !ok2 {
		return bad()
	}
	return d, nil
}

// maxPayload caps drawn sizes so that a long log-normal tail cannot ask for
// more than a UDP datagram or a ring record holds.
const maxPayload = 1 << 20

// draw returns one size.
func (d SizeDist) draw(r *rand.Rand) int {
	var x float64
	switch d.Dist {
	case DistUniform:
		x = float64(d.Min) + r.Float64()*(float64(d.Max)-float64(d.Min)+1)
	case DistLognormal:
		// mean = exp(mu + sigma^2/2)
		mu := math.Log(float64(d.Mean)) - d.Sigma*d.Sigma/2
		x = math.Exp(mu + d.Sigma*r.NormFloat64())
	default:
		x = float64(d.Mean)
	}
	return min(int(x), maxPayload)
}

// ParseGroups parses sub-detector groups "ecal:0-31,hcal:32-47,muon:48-63":
// comma-separated items, where NAME:IDS starts a group and a bare IDS item
// continues the previous one ("ecal:0-31,40,hcal:32-39"). IDS is a source
// id or an inclusive range. Sources must be unique across groups.
func ParseGroups(s string) ([]schemas.SourceGroup, error) {
	var groups []schemas.SourceGroup
	lists := map[string][]string{}
	var order []string
	cur := ""
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if name, ids, ok := strings.Cut(item, ":"); ok {
			if name == "" {
				return nil, fmt.Errorf("groups %q: item %q has an empty group name", s, item)
			}
			if _, seen := lists[name]; !seen {
				order = append(order, name)
			}
			cur, item = name, ids
		}
		if cur == "" {
			return nil, fmt.Errorf("groups %q: %q comes before any \"NAME:\" item", s, item)
		}
		lists[cur] = append(lists[cur], item)
	}
	seen := map[uint32]string{}
	for _, name := range order {
		ids, err := schemas.ParseSourceList(strings.Join(lists[name], ","))
		if err != nil {
			return nil, fmt.Errorf("groups: %s: %w", name, err)
		}
		if len(ids) == 0 {
			return nil, fmt.Errorf("groups: %s has no sources", name)
		}
		for _, id := range ids {
			if g, dup := seen[id]; dup {
				return nil, fmt.Errorf("groups: source %d is in both %s and %s", id, g, name)
			}
			seen[id] = name
		}
		groups = append(groups, schemas.SourceGroup{Name: name, Sources: ids})
	}
	return groups, nil
}
