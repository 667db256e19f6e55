package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/node/config"
	"github.com/sluice-daq/sluice/node/emulator"
	"github.com/sluice-daq/sluice/node/transport"
	_ "github.com/sluice-daq/sluice/node/transport/all" // every transport, for --to
	"github.com/sluice-daq/sluice/node/transport/shm"
	"github.com/sluice-daq/sluice/node/transport/tcp"
)

func init() { register(newReadoutCmd) }

// newReadoutCmd builds `sluice readout`, the readout-board emulator. The
// generator lives in node/emulator (Run) so the node can embed it.
func newReadoutCmd() *cobra.Command {
	var (
		cfg         emulator.Config
		groups      string
		sizeDist    string
		summaryJSON string
		nodeConfig  string
		settings    []string
	)
	cmd := &cobra.Command{
		Use:   "readout --to URI [--from FILE] [--events N | --duration D] [--rate HZ] [--loop N] [fault options]",
		Short: "Emulate readout boards: send multi-fragment packets to any registered input (ring, TCP, UDP, peer, file)",
		Long: `Emulate readout boards: generate detector-like multi-fragment packets (or replay
with --from a file, gzipped or not, of any format sluice splits: ` + strings.Join(emulator.Formats(), ", ") + `;
its events keep their sources and event ids), inject faults, and send them to
` + transportList() + `With --to tcp://HOST:PORT?framing=ferol a FEROL capture (--from) goes out as the
FEROL sent it: its FEROL blocks, one TCP stream per FED (--connections), no
sluice framing, into a node input with the same ?framing=ferol (or a CMS event
builder). Fault options are probabilities per packet; --drop, --duplicate, --corrupt and
--truncate exclude each other. Prints what was sent and injected; a failure
prints the error instead (and how far it got) and exits 1; bad flags or a bad
--to exit 3, before anything is sent.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := readoutConfig(cmd, &cfg, nodeConfig, groups, sizeDist, settings); err != nil {
				return &exitError{code: exitConfig, err: err}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			sum, runErr := emulator.Run(ctx, cfg)
			if runErr != nil && !errors.Is(runErr, context.Canceled) {
				if sum.PacketsSent > 0 {
					runErr = fmt.Errorf("%w (after %s)", runErr, sum.String())
				}
			} else {
				fmt.Fprintln(cmd.OutOrStdout(), sum.String())
			}
			if summaryJSON != "" {
				b, err := json.MarshalIndent(sum, "", "  ")
				if err == nil {
					err = os.WriteFile(summaryJSON, append(b, '\n'), 0o644)
				}
				if err != nil && runErr == nil {
					runErr = fmt.Errorf("--summary-json: %w", err)
				}
			}
			if errors.Is(runErr, context.Canceled) {
				return nil // interrupted: what was sent is reported
			}
			return runErr
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.To, "to", "", "output URI: "+transport.Forms())
	f.StringVar(&cfg.From, "from", "", "replay this file (any format sluice splits, see above; gzipped too) instead of generating")
	f.Uint64Var(&cfg.Events, "events", 0, "events to generate (default 1000 unless --duration or --from; 0: until --duration or stopped)")
	f.DurationVar(&cfg.Duration, "duration", 0, "stop after this long (after the last event's packets of every source)")
	f.Float64Var(&cfg.Rate, "rate", 0, "events per second (0: as fast as the receiver takes them)")
	f.IntVar(&cfg.Loop, "loop", 1, "file mode: replay the file N times, event ids (and LHCb ODIN event numbers) shifted to stay unique")
	f.IntVar(&cfg.Sources, "sources", defaultSources(), "synthetic sources 0..N-1, as many as the default node configuration expects (ignored with --groups)")
	f.StringVar(&nodeConfig, "config", "", "send for the sources this node configuration expects (its sources groups; a farm RU's farm.sources)")
	f.StringVar(&groups, "groups", "", "sub-detector source groups, e.g. ecal:0-31,hcal:32-47,muon:48-63,tracker:64-99")
	f.IntVar(&cfg.Packing, "packing", 1, "fragments per multi-fragment packet")
	f.StringVar(&sizeDist, "size-dist", "fixed:128", "payload bytes: fixed:N, uniform:MIN,MAX or lognormal:MEAN,SIGMA")
	f.Uint64Var(&cfg.Seed, "seed", 1, "seed of payload contents and fault draws")
	f.Uint64Var(&cfg.FirstEventID, "first-event", 0, "event id of the first event")
	f.StringArrayVar(&settings, "set", nil, "a setting of the transport's sender, KEY=VALUE as in the emulator section of a node config (repeatable)")
	f.Int("connections", 0, "tcp: sender connections (0: min(sources, 4)); --set connections=N")
	f.String("ring-size", conf.ByteSize(shm.DefaultRingData).String(), "shm: ring data size, a power of two; --set ring_size=SIZE")
	f.String("socket-buffer", conf.ByteSize(tcp.DefaultSendBuffer).String(), "tcp/udp: SO_SNDBUF; --set socket_buffer=SIZE")
	f.Int("stream-version", tcp.StreamVersion2, "tcp: readout stream version sent: 2, or 1 for a receiver that reads only version 1 (older sluice); --set stream_version=N")
	f.Float64Var(&cfg.Faults.Drop, "drop", 0, "probability a packet is not sent")
	f.Float64Var(&cfg.Faults.Duplicate, "duplicate", 0, "probability a packet is sent twice")
	f.Float64Var(&cfg.Faults.Corrupt, "corrupt", 0, "probability one fragment of a packet gets a payload byte flipped (bad CRC)")
	f.Float64Var(&cfg.Faults.Truncate, "truncate", 0, "probability a packet is cut short (TCP: mid-packet disconnect)")
	f.Float64Var(&cfg.Faults.Reorder, "reorder", 0, "probability a packet is held back behind later ones")
	f.IntVar(&cfg.Faults.ReorderWindow, "reorder-window", 8, "a reordered packet goes out after 1..N later packets")
	f.Float64Var(&cfg.Faults.Stall, "stall", 0, "probability a source stalls at a packet")
	f.DurationVar(&cfg.Faults.StallDuration, "stall-duration", 0, "how long a stalled source waits (default 10ms)")
	f.StringVar(&summaryJSON, "summary-json", "", "write the summary of what was sent as JSON to this file")
	return cmd
}

// readoutConfig completes cfg from the flags and checks it as the run would,
// so that a bad flag or --to is a configuration error before anything is
// opened: the sender's settings, the size distribution, the groups, the
// emulator's settings, and the sender's own checks of the URI (e.g. port 0
// to send to).
// defaultReadoutEvents is what a synthetic `sluice readout` sends given
// neither --events nor --duration (--events 0: until stopped).
const defaultReadoutEvents = 1000

func readoutConfig(cmd *cobra.Command, cfg *emulator.Config, nodeConfig, groups, sizeDist string, settings []string) error {
	if cfg.To == "" {
		return fmt.Errorf("--to is required (%s)", transport.Forms())
	}
	var err error
	if nodeConfig != "" {
		if groups != "" || cmd.Flags().Changed("sources") {
			return fmt.Errorf("--config takes the sources from the node's configuration: give it, --groups or --sources, not several")
		}
		if err := sourcesFromConfig(cfg, nodeConfig); err != nil {
			return err
		}
	}
	if !cmd.Flags().Changed("events") && cfg.Duration == 0 && cfg.From == "" {
		cfg.Events = defaultReadoutEvents
	}
	var from map[string]string
	if cfg.Sender, from, err = senderOptions(cmd, cfg.To, settings); err != nil {
		return err
	}
	if cfg.FragmentSize, err = emulator.ParseSizeDist(sizeDist); err != nil {
		return fmt.Errorf("--size-dist: %w", err)
	}
	if groups != "" {
		if cfg.Groups, err = emulator.ParseGroups(groups); err != nil {
			return fmt.Errorf("--groups: %w", err)
		}
	}
	if ps := cfg.WithDefaults().Validate(); len(ps) > 0 {
		return fmt.Errorf("%s", ps)
	}
	u, _ := transport.ParseURI(cfg.To) // senderOptions parsed it
	if ps := cfg.Sender.Check(u); len(ps) > 0 {
		for i := range ps {
			switch f, ok := from[ps[i].Path]; {
			case ps[i].Path == "":
				ps[i].Path = "--to " + cfg.To
			case ok:
				ps[i].Path = f
			default:
				ps[i].Path = "--set " + ps[i].Path
			}
		}
		return fmt.Errorf("%s", ps)
	}
	return nil
}

// sourcesFromConfig sends for the sources a node configured with file
// expects: its source groups, or, for a farm readout unit, its share
// (farm.sources).
func sourcesFromConfig(cfg *emulator.Config, file string) error {
	nc, err := config.Load(file)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	if nc.Farm.ID != "" && nc.Farm.Sources != "" {
		cfg.SourceList = nc.Farm.Sources
		return nil
	}
	if cfg.Groups, err = nc.Groups(); err != nil {
		return fmt.Errorf("--config %s: %w", file, err)
	}
	return nil
}

// defaultSources is the number of sources of the default node
// configuration (`sluice config default`: 0-15), so that a readout and a
// node both started without settings agree on what makes an event whole.
func defaultSources() int {
	gs, err := config.Default().Groups()
	if err != nil {
		panic("readout: the default configuration's sources do not parse: " + err.Error())
	}
	n := 0
	for _, g := range gs {
		n += len(g.Sources)
	}
	return n
}

// senderFlags are the flags that stand for a setting of the transport's
// sender (its key in the emulator section of a node config).
var senderFlags = []struct{ flag, key string }{
	{"connections", "connections"}, {"ring-size", "ring_size"}, {"socket-buffer", "socket_buffer"},
	{"stream-version", "stream_version"},
}

// senderOptions decodes the sender settings given for uri (flags the user
// set, and --set KEY=VALUE) into its transport's own settings, strictly: a
// setting the transport does not take is an error naming those it does.
// from maps each setting's key to how the user gave it ("--connections",
// "--set ring_size"), for messages about it.
func senderOptions(cmd *cobra.Command, uri string, settings []string) (transport.SenderOptions, map[string]string, error) {
	u, err := transport.ParseURI(uri)
	if err != nil {
		return nil, nil, fmt.Errorf("--to: %w", err)
	}
	t := transport.Lookup(u.Scheme)
	if t.NewSenderOptions == nil {
		return nil, nil, fmt.Errorf("--to %s: %s:// has no sender", uri, u.Scheme)
	}
	keys := map[string]yaml.Node{}
	from := map[string]string{} // key -> how it was given, for messages
	for _, sf := range senderFlags {
		if f := cmd.Flags().Lookup(sf.flag); f.Changed {
			keys[sf.key] = yaml.Node{Kind: yaml.ScalarNode, Value: f.Value.String()}
			from[sf.key] = "--" + sf.flag
		}
	}
	for _, kv := range settings {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, nil, fmt.Errorf("--set %q: want KEY=VALUE", kv)
		}
		keys[k] = yaml.Node{Kind: yaml.ScalarNode, Value: v}
		from[k] = "--set " + k
	}
	opts := t.NewSenderOptions()
	if ps := conf.Decode(opts, keys); len(ps) > 0 {
		msgs := make([]string, len(ps))
		for i, p := range ps {
			p.Path = from[p.Path]
			msgs[i] = p.String()
		}
		return nil, nil, fmt.Errorf("%s:// sender: %s", u.Scheme, strings.Join(msgs, "; "))
	}
	return opts, from, nil
}

// transportList lists the registered transports with a sender, one line
// each, for the help text.
func transportList() string {
	var b strings.Builder
	for _, t := range transport.Registered() {
		if t.OpenSender != nil {
			fmt.Fprintf(&b, "  %-21s %s\n", t.Scheme+"://"+t.Target, t.About)
		}
	}
	return b.String()
}
