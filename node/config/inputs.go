package config

import (
	"errors"
	"math"
	"os"
	"sort"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/node/transport"
	_ "github.com/sluice-daq/sluice/node/transport/all"
	"github.com/sluice-daq/sluice/schemas"
)

// Input is one readout input: the URI of a registered transport (package
// transport: shm://NAME, tcp://HOST:PORT, udp://HOST:PORT[?format=vtp],
// file://PATH), the keys that transport takes written beside it (e.g.
// credit_window for tcp://), and an optional embedded readout emulator that
// writes to URI, as `sluice readout --to URI` would.
type Input struct {
	URI string `yaml:"uri"`
	// Options are the transport's input settings, its own struct (e.g.
	// *tcp.Options), decoded from the keys beside uri; nil: its defaults.
	Options transport.InputOptions `yaml:"-"`
	// Keys holds the keys beside uri as written, until Parse decodes them
	// into Options (which transport takes which keys is known only once
	// the URI is); empty afterwards.
	Keys     map[string]yaml.Node `yaml:",inline"`
	Emulator *Emulator            `yaml:"emulator"`
}

// Emulator configures an embedded readout emulator (the `sluice readout`
// options): synthetic detector-like events, or the events of a real file
// replayed Loop times with event ids shifted so they stay unique. Zero
// values take the emulator's defaults. Beside these keys, the section takes
// those of the input's transport's sender (e.g. ring_size for shm://,
// connections for tcp://), decoded into Sender.
type Emulator struct {
	From     string        `yaml:"from"`     // file to replay (MDF, MEP, VDIF, native MFP); empty = synthetic
	Loop     int           `yaml:"loop"`     // file mode: replay the file this many times (default 1)
	Events   uint64        `yaml:"events"`   // synthetic: events to send (0 = until Duration; both 0: 1000)
	Duration time.Duration `yaml:"duration"` // synthetic: stop after this long (0 = no limit)
	Rate     float64       `yaml:"rate"`     // events per second (0 = as fast as the node takes them)
	// Sources are the synthetic source ids sent (a source list); empty: the
	// configured source groups, whose names choose the payload kind
	// (calorimeter towers for ecal/hcal, muon candidates for muon, ...).
	Sources      string   `yaml:"sources"`
	Packing      int      `yaml:"packing"`        // fragments per multi-fragment packet (default 1)
	FragmentSize SizeDist `yaml:"fragment_size"`  // synthetic payload sizes
	Faults       Faults   `yaml:"faults"`         // fault injection probabilities
	Seed         uint64   `yaml:"seed"`           // payload content and fault draws
	FirstEventID uint64   `yaml:"first_event_id"` // synthetic: first event id
	// Sender are the settings of the transport's sender (e.g.
	// *shm.SenderOptions), decoded from the keys Keys holds; nil: its
	// defaults.
	Sender transport.SenderOptions `yaml:"-"`
	Keys   map[string]yaml.Node    `yaml:",inline"`
}

// SizeDist is a fragment payload size distribution in bytes.
type SizeDist struct {
	Dist  string   `yaml:"dist"`  // "fixed" (default), "uniform" or "lognormal"
	Mean  ByteSize `yaml:"mean"`  // fixed: the size; lognormal: the mean (default 128)
	Min   ByteSize `yaml:"min"`   // uniform: lower bound
	Max   ByteSize `yaml:"max"`   // uniform: upper bound
	Sigma float64  `yaml:"sigma"` // lognormal: sigma of log(size) (default 0.5)
}

// Faults are fault-injection probabilities per packet in [0, 1]. Drop,
// Duplicate, Corrupt and Truncate exclude each other (their sum is at most
// 1); Reorder and Stall apply independently.
type Faults struct {
	Drop          float64       `yaml:"drop"`
	Duplicate     float64       `yaml:"duplicate"`
	Corrupt       float64       `yaml:"corrupt"`
	Truncate      float64       `yaml:"truncate"`
	Reorder       float64       `yaml:"reorder"`
	Stall         float64       `yaml:"stall"`
	ReorderWindow int           `yaml:"reorder_window"` // packets (default 8)
	StallDuration time.Duration `yaml:"stall_duration"` // default 10ms
}

// emulatorKeys is Emulator without its methods, for its own keys.
type emulatorKeys Emulator

// transportOf is the transport of uri, nil when uri does not parse (its
// problem is reported by validate).
func transportOf(uri string) (transport.URI, *transport.Transport) {
	u, err := transport.ParseURI(uri)
	if err != nil {
		return u, nil
	}
	return u, transport.Lookup(u.Scheme)
}

// decodeInputs decodes the keys written beside each input's uri into its
// transport's input settings, and those of its emulator section into the
// transport's sender settings, strictly: a key the transport does not take
// is a problem listing those it does. An input whose URI does not parse
// keeps its keys unchecked (the URI's problem says what to fix first).
func (c *Config) decodeInputs(ps *conf.Problems) {
	for i := range c.Inputs {
		in := &c.Inputs[i]
		p := conf.Index("inputs", i)
		_, t := transportOf(in.URI)
		if t == nil {
			continue
		}
		if t.NewInputOptions != nil {
			in.Options = t.NewInputOptions()
			*ps = append(*ps, conf.Decode(in.Options, in.Keys, "uri", "emulator").In(p)...)
			in.Keys = nil
		}
		if e := in.Emulator; e != nil && t.NewSenderOptions != nil {
			e.Sender = t.NewSenderOptions()
			*ps = append(*ps, conf.Decode(e.Sender, e.Keys, conf.Keys(emulatorKeys{})...).In(p+".emulator")...)
			e.Keys = nil
		}
	}
}

// fillInputDefaults gives an input without settings its transport's
// defaults, and its emulator the emulator's.
func fillInputDefaults(in *Input) {
	_, t := transportOf(in.URI)
	if in.Options == nil && t != nil && t.NewInputOptions != nil {
		in.Options = t.NewInputOptions()
	}
	e := in.Emulator
	if e == nil {
		return
	}
	if e.Sender == nil && t != nil && t.NewSenderOptions != nil {
		e.Sender = t.NewSenderOptions()
	}
	if e.Loop == 0 {
		e.Loop = 1
	}
	if e.Packing == 0 {
		e.Packing = 1
	}
	if e.FragmentSize.Dist == "" {
		e.FragmentSize.Dist = "fixed"
	}
	if e.FragmentSize.Mean == 0 {
		e.FragmentSize.Mean = 128
	}
	if e.FragmentSize.Sigma == 0 {
		e.FragmentSize.Sigma = 0.5
	}
	if e.Faults.ReorderWindow == 0 {
		e.Faults.ReorderWindow = 8
	}
	if e.Faults.StallDuration == 0 {
		e.Faults.StallDuration = 10 * time.Millisecond
	}
}

func (c *Config) validateInputs(ps *conf.Problems) {
	if len(c.Inputs) == 0 {
		ps.Add("inputs", nil, "want at least one input (%s)", transport.Forms())
	}
	seen := map[string]int{}
	for i, in := range c.Inputs {
		p := conf.Index("inputs", i)
		u, err := transport.ParseURI(in.URI)
		if err != nil {
			want := err.Error()
			if ue := (*transport.URIError)(nil); errors.As(err, &ue) {
				want = ue.Want
			}
			ps.Add(p+".uri", in.URI, "%s", want)
		}
		if j, dup := seen[in.URI]; dup && in.URI != "" {
			ps.Add(p+".uri", in.URI, "want each input once (also inputs[%d])", j)
		}
		seen[in.URI] = i
		var t *transport.Transport
		if err == nil {
			t = transport.Lookup(u.Scheme)
		}
		switch {
		case t == nil:
		case t.OpenInput == nil:
			ps.Add(p+".uri", in.URI, "want the URI of an input: %s:// only sends", u.Scheme)
		default:
			opts := in.Options
			if opts == nil {
				opts = t.NewInputOptions()
			}
			*ps = append(*ps, opts.Check(u).In(p)...)
		}
		e := in.Emulator
		if e == nil {
			continue
		}
		switch {
		case t == nil:
		case !t.Embeddable || t.OpenSender == nil:
			ps.Add(p+".emulator", nil, "an embedded emulator cannot feed a %s:// input: it writes to %s", u.Scheme, transport.EmbeddableForms())
		default:
			opts := e.Sender
			if opts == nil {
				opts = t.NewSenderOptions()
			}
			*ps = append(*ps, opts.Check(u).In(p+".emulator")...)
		}
		validateEmulator(ps, p+".emulator", e)
	}
}

func validateEmulator(ps *conf.Problems, p string, e *Emulator) {
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
}

// preflightInputs checks what the inputs need on this machine: the file an
// emulator replays, and whatever the transport checks (the file a file://
// input reads).
func (c *Config) preflightInputs(ps *conf.Problems) {
	for i, in := range c.Inputs {
		p := conf.Index("inputs", i)
		if in.Emulator != nil && in.Emulator.From != "" {
			if _, err := os.Stat(in.Emulator.From); err != nil {
				ps.Add(p+".emulator.from", in.Emulator.From, "want an existing file (%v)", unwrapPath(err))
			}
		}
		if u, t := transportOf(in.URI); t != nil && t.Preflight != nil {
			if err := t.Preflight(u); err != nil {
				ps.Add(p+".uri", in.URI, "%v", err)
			}
		}
	}
}

// MarshalYAML writes the input as operators write it: uri, the transport's
// keys, then the emulator section.
func (in Input) MarshalYAML() (any, error) {
	opts := in.Options
	if _, t := transportOf(in.URI); opts == nil && t != nil && t.NewInputOptions != nil {
		opts = t.NewInputOptions()
	}
	n := &yaml.Node{Kind: yaml.MappingNode}
	if err := appendKeys(n, struct {
		URI string `yaml:"uri"`
	}{in.URI}, opts, in.Keys); err != nil {
		return nil, err
	}
	if in.Emulator != nil {
		if err := appendKeys(n, struct {
			Emulator *Emulator `yaml:"emulator"`
		}{in.Emulator}); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// MarshalYAML writes the section with its sender's keys after its own.
func (e Emulator) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.MappingNode}
	keys := e.Keys
	e.Keys = nil
	if err := appendKeys(n, emulatorKeys(e), e.Sender, keys); err != nil {
		return nil, err
	}
	return n, nil
}

// appendKeys appends to mapping n the keys of each value (a struct, nil,
// or undecoded keys as written).
func appendKeys(n *yaml.Node, values ...any) error {
	for _, v := range values {
		switch v := v.(type) {
		case nil:
		case map[string]yaml.Node:
			names := make([]string, 0, len(v))
			for k := range v {
				names = append(names, k)
			}
			sort.Strings(names)
			for _, k := range names {
				val := v[k]
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, &val)
			}
		default:
			var m yaml.Node
			if err := m.Encode(v); err != nil {
				return err
			}
			n.Content = append(n.Content, m.Content...)
		}
	}
	return nil
}
