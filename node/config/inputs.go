package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/node/emulator"
	"github.com/sluice-daq/sluice/node/farm"
	"github.com/sluice-daq/sluice/node/transport"
	_ "github.com/sluice-daq/sluice/node/transport/all"
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

// Emulator is the emulator section of an input: an embedded readout
// emulator (package emulator, whose Config holds the keys, defaults and
// rules) that writes to the input's URI, and beside its keys those of the
// input's transport's sender (e.g. ring_size for shm://, connections for
// tcp://), decoded into Config.Sender.
type Emulator struct {
	emulator.Config `yaml:",inline"`
	// Keys holds the sender's keys as written until Parse decodes them.
	Keys map[string]yaml.Node `yaml:",inline"`
}

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
			*ps = append(*ps, conf.Decode(e.Sender, e.Keys, conf.Keys(emulator.Config{})...).In(p+".emulator")...)
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
	e.Config = e.Config.WithDefaults()
}

func (c *Config) validateInputs(ps *conf.Problems) {
	// A farm's builder-only node gets every fragment from the RUs over the
	// peer transport: it has no input of its own. One it had would feed a
	// builder that builds only what the EM assigns it, so its fragments
	// would all be discarded (they name no assignment): refused here, as
	// on an EM-only node (buOnly: no RU role).
	roles, err := c.Farm.ParsedRoles()
	buOnly := c.Farm.Enabled() && err == nil && roles&farm.RoleRU == 0
	switch {
	case len(c.Inputs) == 0 && !buOnly:
		ps.Add("inputs", nil, "want at least one input (%s)", transport.Forms())
	case len(c.Inputs) > 0 && buOnly && roles&farm.RoleBU == 0:
		// An EM-only node: nothing would take their fragments.
		ps.Add("inputs", len(c.Inputs), "want none on an EM-only node (farm.roles: em: no readout, no builder)")
	case len(c.Inputs) > 0 && buOnly:
		ps.Add("inputs", len(c.Inputs), "want none on a builder-only farm node (farm.roles: bu): its fragments come from the RUs over the peer transport; read these sources on an RU (farm.roles: ru or both)")
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
		*ps = append(*ps, e.Validate().In(p+".emulator")...)
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
	if err := appendKeys(n, e.Config, e.Sender, e.Keys); err != nil {
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

// Marker lines of default.yaml, replaced by the registered transports'
// keys: a transport's keys are documented where it is registered (the doc
// tags of its settings), not in this package.
const (
	inputKeysMarker  = "#@ input keys"
	senderKeysMarker = "#@ sender keys"
)

// withTransportKeys returns the default file's template with each marker
// line replaced, at its indentation, by the transports' keys: for every
// registered transport with an input (inputs) or one an embedded emulator
// may feed (senders), its URI form and what it is, then each key with its
// default and its doc tag.
func withTransportKeys(template []byte) []byte {
	var out []string
	for _, line := range strings.Split(string(template), "\n") {
		text := strings.TrimLeft(line, " ")
		indent := line[:len(line)-len(text)]
		switch text {
		case inputKeysMarker:
			out = append(out, transportKeys(indent, func(t *transport.Transport) any {
				if t.NewInputOptions == nil {
					return nil
				}
				return t.NewInputOptions()
			})...)
		case senderKeysMarker:
			out = append(out, transportKeys(indent, func(t *transport.Transport) any {
				if t.NewSenderOptions == nil || !t.Embeddable {
					return nil
				}
				return t.NewSenderOptions()
			})...)
		default:
			out = append(out, line)
		}
	}
	return []byte(strings.Join(out, "\n"))
}

func transportKeys(indent string, options func(*transport.Transport) any) []string {
	var out []string
	for _, t := range transport.Registered() {
		opts := options(t)
		if opts == nil {
			continue
		}
		var n yaml.Node
		if err := n.Encode(opts); err != nil {
			panic(fmt.Sprintf("config: the settings of %s:// do not encode: %v", t.Scheme, err))
		}
		docs := map[string]string{}
		for typ, i := reflect.TypeOf(opts).Elem(), 0; i < typ.NumField(); i++ {
			docs[conf.Key(typ.Field(i))] = typ.Field(i).Tag.Get("doc")
		}
		head := fmt.Sprintf("%s#   %-20s %s", indent, t.Form(), t.About)
		if len(n.Content) == 0 {
			head += "; no keys"
		}
		out = append(out, head)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i].Value, n.Content[i+1].Value
			line := fmt.Sprintf("%s#     %s: %s", indent, k, v)
			if d := docs[k]; d != "" {
				line = fmt.Sprintf("%-*s # %s", len(indent)+30, line, d)
			}
			out = append(out, line)
		}
	}
	return out
}
