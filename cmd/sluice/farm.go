package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"os/user"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-daq/sluice/node"
	"github.com/sluice-daq/sluice/node/config"
	"github.com/sluice-daq/sluice/node/farm"
	"github.com/sluice-daq/sluice/node/farm/control"
	"github.com/sluice-daq/sluice/schemas"
)

func init() { register(newFarmCmd) }

// farmFlags are the flags every farm subcommand that talks to etcd takes.
type farmFlags struct {
	etcd    []string
	farm    string
	timeout time.Duration
}

func (f *farmFlags) add(cmd *cobra.Command) {
	def := []string{"127.0.0.1:2379"}
	if e := os.Getenv("SLUICE_ETCD"); e != "" {
		def = strings.Split(e, ",")
	}
	farmID := "sluice"
	if e := os.Getenv("SLUICE_FARM"); e != "" {
		farmID = e
	}
	cmd.PersistentFlags().StringSliceVar(&f.etcd, "etcd", def, "etcd endpoints, host:port,... (env SLUICE_ETCD)")
	cmd.PersistentFlags().StringVar(&f.farm, "farm", farmID, "farm id (env SLUICE_FARM)")
	cmd.PersistentFlags().DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to wait for etcd")
}

func (f *farmFlags) dial(ctx context.Context) (*control.Client, error) {
	return control.Dial(ctx, control.Config{Endpoints: f.etcd, Farm: f.farm, DialTimeout: f.timeout})
}

// newFarmCmd builds `sluice farm etcd | start | stop | status`.
func newFarmCmd() *cobra.Command {
	var ff farmFlags
	cmd := &cobra.Command{
		Use:   "farm",
		Short: "Farm run control on etcd: start/stop a run, show members, event manager and farm ledger; run etcd",
		Long: `A farm is many sluice nodes that together build every event once. Its control
plane is etcd: membership, the event manager's election, the run configuration
and the desired run state live under /sluice/<farm>/. These commands read and
write it; every node watches the run state and follows it.`,
	}
	ff.add(cmd)
	cmd.AddCommand(newFarmEtcdCmd(), newFarmStartCmd(&ff), newFarmStopCmd(&ff), newFarmStatusCmd(&ff), newFarmSDCmd(&ff),
		newFarmBenchCmd(), newFarmBenchUnitCmd(&ff))
	cmd.AddCommand(newFarmMaskCmd(&ff), newFarmDrainCmd(&ff))
	return cmd
}

// newFarmEtcdCmd: the embedded etcd server as its own process.
func newFarmEtcdCmd() *cobra.Command {
	var cfg control.ServerConfig
	cmd := &cobra.Command{
		Use:   "etcd --data-dir DIR",
		Short: "Run a single-member etcd server for a farm (tests, demos, small farms) until SIGINT/SIGTERM",
		Long: `Runs etcd (the embedded server of go.etcd.io/etcd/server/v3) as its own process:
nodes must never host it, since a test kills nodes. It prints "etcd: serving
HOST:PORT" once ready. Production farms point nodes at an existing etcd cluster
instead (see --etcd).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.DataDir == "" {
				return errors.New("farm etcd: --data-dir is required")
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			s, err := control.StartServer(cfg)
			if err != nil {
				return err
			}
			defer s.Close()
			fmt.Fprintf(cmd.OutOrStdout(), "etcd: serving %s\n", s.Endpoint())
			select {
			case <-ctx.Done():
				return nil
			case err := <-s.Err():
				return fmt.Errorf("farm etcd: %w", err)
			}
		},
	}
	cmd.Flags().StringVar(&cfg.DataDir, "data-dir", "", "directory of etcd's data (created if missing)")
	cmd.Flags().StringVar(&cfg.Listen, "listen", "http://127.0.0.1:2379", "client URL to listen at (port 0: a free port, printed)")
	cmd.Flags().StringVar(&cfg.Peer, "peer", "http://127.0.0.1:2380", "peer URL to listen at")
	cmd.Flags().StringVar(&cfg.Name, "name", "sluice", "member name")
	cmd.Flags().UintVar(&cfg.TickMs, "tick-ms", 100, "heartbeat interval in ms (tests shorten it)")
	cmd.Flags().UintVar(&cfg.ElectionMs, "election-ms", 1000, "election timeout in ms; the minimum lease TTL is 1.5 times it")
	return cmd
}

// newFarmSDCmd: Prometheus's HTTP service discovery of the farm's nodes.
func newFarmSDCmd(ff *farmFlags) *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "sd [--listen HOST:PORT]",
		Short: "Serve Prometheus HTTP service discovery of the farm's nodes, read from etcd, until SIGINT/SIGTERM",
		Long: `Serves GET /sd in the format of Prometheus's http_sd_configs: a JSON list with
one target group per member of the farm that registered an HTTP endpoint (the
node's http.address, which serves /metrics), labelled farm, node and roles,
with __meta_sluice_incarnation, __meta_sluice_address (peer transport),
__meta_sluice_sources and __meta_sluice_em ("true" for the event manager) for
relabelling. The members are read from etcd on every request, so the scrape
configuration needs no list of hosts (see configs/prometheus-farm.yml). It
prints "farm sd: serving http://HOST:PORT/sd" once listening; 503 while etcd
does not answer. It answers anyone who asks with the members' addresses: listen
on loopback (the default) or on the monitoring network only.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			dctx, cancel := context.WithTimeout(ctx, ff.timeout)
			c, err := ff.dial(dctx)
			cancel()
			if err != nil {
				return err
			}
			defer c.Close()
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("farm sd: %w", err)
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			mux := http.NewServeMux()
			mux.Handle("/sd", control.SDHandler(c, ff.timeout, log))
			srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
			errc := make(chan error, 1)
			go func() { errc <- srv.Serve(ln) }()
			fmt.Fprintf(cmd.OutOrStdout(), "farm sd: serving http://%s/sd (farm %s)\n", ln.Addr(), c.Farm())
			select {
			case <-ctx.Done():
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				defer cancel()
				return srv.Shutdown(sctx)
			case err := <-errc:
				return fmt.Errorf("farm sd: %w", err)
			}
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:9466", "address to serve /sd at (port 0: a free port, printed)")
	return cmd
}

// runOpts are the farm-wide settings of a run that `farm start` records.
type runOpts struct {
	config         string
	protocol       string
	unit           string
	assignmentSize int
	release        string
	maxOutstanding int
	maxRequests    int
	releaseGroup   int
}

func newFarmStartCmd(ff *farmFlags) *cobra.Command {
	var run uint32
	var o runOpts
	cmd := &cobra.Command{
		Use:   "start --run N [--config FILE]",
		Short: "Start run N on the farm: record its configuration (once per run) and ask every node to run it",
		Long: `Records run N's configuration in etcd, taken from a node configuration file
(sources, trigger stages with their plugins' SHA-256 digests and parameters,
prescales) and the farm flags, then sets the desired run state to running. A
run's configuration is written once: starting it again with another one fails,
naming every difference, and so does a node whose own view differs. The
farm settings (protocol, unit, assignment size, release, max outstanding,
release group) are the configuration file's farm section unless given as
flags. Without --config the run's recorded configuration is used.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("run") {
				return errors.New("farm start: --run is required")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), ff.timeout)
			defer cancel()
			c, err := ff.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			if o.config != "" {
				nc, err := config.Load(o.config)
				if err != nil {
					return &exitError{code: exitConfig, err: err}
				}
				rc, err := runConfigOf(nc, run, o, cmd.Flags().Changed)
				if err != nil {
					return &exitError{code: exitConfig, err: err}
				}
				v, err := c.PutRunConfig(ctx, rc)
				if err != nil {
					return &exitError{code: exitConfig, err: err}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "run %d configuration: version %d\n", run, v)
			} else if set := changedFarmFlags(cmd); len(set) > 0 {
				return &exitError{code: exitConfig, err: fmt.Errorf("farm start: --%s need --config: without it the run's recorded configuration is used as it is", strings.Join(set, ", --"))}
			} else if _, _, err := c.RunConfig(ctx, run); err != nil {
				return fmt.Errorf("farm start: %w (give --config to record one)", err)
			}
			if _, err := c.SetRunState(ctx, control.RunState{State: control.StateRunning, Run: run, By: whoami()}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "farm %s: run %d running\n", c.Farm(), run)
			return nil
		},
	}
	def := farm.DefaultConfig()
	from := func(key, def string) string {
		return fmt.Sprintf(" (default: farm.%s of --config, itself %s when the file does not set it)", key, def)
	}
	cmd.Flags().Uint32Var(&run, "run", 0, "run number")
	cmd.Flags().StringVar(&o.config, "config", "", "node configuration file the run's sources, trigger chain and farm settings come from")
	cmd.Flags().StringVar(&o.protocol, "protocol", "", "push (BUs give credits, the EM announces to RUs) or pull (BUs ask, then request from RUs)"+from("protocol", def.Protocol))
	cmd.Flags().StringVar(&o.unit, "unit", "", "what assignments count: events (ids named by the RU of the trigger source) or packets (the readout's packet sequence: one multi-fragment packet per source)"+from("unit", def.Unit))
	cmd.Flags().IntVar(&o.assignmentSize, "assignment-size", 0, "elements (events or packets) per assignment"+from("assignment_size", strconv.Itoa(def.AssignmentSize)))
	cmd.Flags().StringVar(&o.release, "release", "", "when RUs free an assignment's bytes: received, decided or durable"+from("release", def.Release))
	cmd.Flags().IntVar(&o.maxOutstanding, "max-outstanding", 0, "pull: unreleased assignments per BU at most"+from("max_outstanding", strconv.Itoa(def.MaxOutstanding)))
	cmd.Flags().IntVar(&o.maxRequests, "max-requests", 0, "pull: requests a BU has outstanding at the RUs at once, over all its assignments, 0 for no bound"+from("max_requests", strconv.Itoa(def.MaxRequests)))
	cmd.Flags().IntVar(&o.releaseGroup, "release-group", 0, "releases a BU sends per message"+from("release_group", strconv.Itoa(def.ReleaseGroup)))
	return cmd
}

// runConfigOf derives a run's farm configuration from a node's (its farm
// section, see node.FarmRunConfig), the options given on the command line
// (set) taking the place of the section's values.
func runConfigOf(nc *config.Config, run uint32, o runOpts, set func(flag string) bool) (farm.RunConfig, error) {
	nc.Run = run
	f := &nc.Farm
	for _, x := range []struct {
		flag string
		fn   func()
	}{
		{"protocol", func() { f.Protocol = o.protocol }},
		{"unit", func() { f.Unit = o.unit }},
		{"assignment-size", func() { f.AssignmentSize = o.assignmentSize }},
		{"release", func() { f.Release = o.release }},
		{"max-outstanding", func() { f.MaxOutstanding = o.maxOutstanding }},
		{"max-requests", func() { f.MaxRequests = o.maxRequests }},
		{"release-group", func() { f.ReleaseGroup = o.releaseGroup }},
	} {
		if set(x.flag) {
			x.fn()
		}
	}
	return node.FarmRunConfig(nc)
}

// farmSettingFlags are the flags of `farm start` that override the
// configuration file's farm section.
var farmSettingFlags = []string{"protocol", "unit", "assignment-size", "release", "max-outstanding", "release-group"}

func changedFarmFlags(cmd *cobra.Command) []string {
	var out []string
	for _, f := range farmSettingFlags {
		if cmd.Flags().Changed(f) {
			out = append(out, f)
		}
	}
	return out
}

// printNodeViews is the members' own view: state, rates over the last
// second, the bytes each RU holds, each BU's assignments and bytes in
// flight, the credit the EM holds for each BU, and the peer links up.
func printNodeViews(w io.Writer, nodes []nodeView) {
	credits := emCredits(nodes)
	var events, bytes float64
	fmt.Fprintln(w, "nodes (their own /status):")
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  NODE\tSTATE\tEVENTS/S\tMB/S\tRU HELD MiB\tBU IN FLIGHT\tCREDIT\tPEERS UP\tHTTP")
	for _, v := range nodes {
		if v.Error != "" {
			fmt.Fprintf(tw, "  %s\t?\t\t\t\t\t\t\t%s (%s)\n", v.Node, v.HTTP, v.Error)
			continue
		}
		held, inflight, credit, up := "-", "-", "-", "-"
		if f := v.Farm; f != nil {
			if f.RU != nil {
				held = fmt.Sprintf("%.1f", float64(f.RU.HeldBytes)/(1<<20))
			}
			if f.BU != nil {
				inflight = fmt.Sprintf("%d (%.1f MiB)", f.BU.InFlight, float64(f.BU.BytesUsed)/(1<<20))
			}
			if c, ok := credits[v.Node]; ok {
				credit = strconv.FormatInt(c, 10)
			}
			n := 0
			for _, p := range f.Peers {
				if p.Connected {
					n++
				}
			}
			up = fmt.Sprintf("%d/%d", n, len(f.Peers))
		}
		var ev, mb float64
		if v.Rates != nil {
			ev, mb = v.Rates.EventsPerSecond, v.Rates.BytesPerSecond/1e6
			events += ev
			bytes += v.Rates.BytesPerSecond
		}
		fmt.Fprintf(tw, "  %s\t%s\t%.0f\t%.1f\t%s\t%s\t%s\t%s\t%s\n", v.Node, v.State, ev, mb, held, inflight, credit, up, v.HTTP)
	}
	tw.Flush()
	fmt.Fprintf(w, "farm rates: %.0f events/s built, %.1f MB/s into the builders\n", events, bytes/1e6)
}

func whoami() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}

func newFarmStopCmd(ff *farmFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "stop",
		Short: "Ask every node of the farm to stop the current run (they drain, then stop)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), ff.timeout)
			defer cancel()
			c, err := ff.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			st, ok, err := c.RunState(ctx)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("farm stop: farm %s never ran", c.Farm())
			}
			if st.State == control.StateStopped {
				fmt.Fprintf(cmd.OutOrStdout(), "farm %s: run %d already stopped\n", c.Farm(), st.Run)
				return nil
			}
			if _, err := c.SetRunState(ctx, control.RunState{State: control.StateStopped, Run: st.Run, By: whoami()}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "farm %s: run %d stopping\n", c.Farm(), st.Run)
			return nil
		},
	}
}

func newFarmStatusCmd(ff *farmFlags) *cobra.Command {
	var asJSON, ledger bool
	cmd := &cobra.Command{
		Use:   "status [--json | --ledger]",
		Short: "Show the farm: members, the event manager, the run state, each node's rates, credit and held bytes, and the farm ledger",
		Long: `Reads etcd (members with roles and incarnations, the event manager, the desired
run state and the run's configuration, the farm ledger the event manager
publishes) and each member's HTTP /status at the endpoint it registered (its
node state, event and byte rates over the last second, what its RU holds and
its BU has in flight, the event credit the event manager holds for it, its
peer links). A member whose /status does not answer within a second is shown
with the error; the rest of the status is etcd's.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), ff.timeout)
			defer cancel()
			c, err := ff.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			st, err := c.Status(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(farmView{Status: st, Nodes: nodeViews(ctx, st.Members)})
			}
			if ledger {
				if st.Ledger == nil {
					return errors.New("farm status: no farm ledger published yet (no event manager has led a run)")
				}
				if st.Run != nil {
					fmt.Fprintf(cmd.OutOrStdout(), "farm %s, run %d (%s)\n", st.Farm, st.Run.Run, st.Run.State)
				}
				fmt.Fprint(cmd.OutOrStdout(), st.Ledger.String())
				if ledgerFault(st) {
					return &exitError{code: exitUnbalanced, err: errors.New("farm status: the farm ledger does not balance")}
				}
				if !st.Ledger.Balanced {
					fmt.Fprintf(cmd.OutOrStdout(), "the run is going on: %d elements open (queued or being built) is not a fault\n", st.Ledger.Open)
				}
				return nil
			}
			printFarmStatus(cmd.OutOrStdout(), st, nodeViews(ctx, st.Members))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	cmd.Flags().BoolVar(&ledger, "ledger", false, "print only the farm ledger of the current run (exit status 2 when it does not balance: a violation, or elements still open once the run is stopped)")
	return cmd
}

// ledgerFault: the farm ledger shows a fault — a violation (an element
// built twice, built and lost, built unannounced), or elements not built
// nor counted lost once the run is stopped. While the run goes on, open
// elements are work in progress.
func ledgerFault(st control.Status) bool {
	l := st.Ledger
	if l.Balanced {
		return false
	}
	if l.Violations > 0 {
		return true
	}
	return st.Run == nil || st.Run.State != control.StateRunning
}

// farmView is `farm status --json`: etcd's view and each member's own.
type farmView struct {
	control.Status
	Nodes []nodeView `json:"nodes"`
}

// nodeView is one member's /status, read at its registered HTTP address.
type nodeView struct {
	Node  string           `json:"node"`
	HTTP  string           `json:"http,omitempty"`
	Error string           `json:"error,omitempty"` // /status could not be read
	State string           `json:"state,omitempty"`
	Rates *node.Rates      `json:"rates,omitempty"`
	Farm  *node.FarmStatus `json:"farm,omitempty"`
}

// nodeViews reads every member's /status concurrently (a second each at
// most), in the members' order.
func nodeViews(ctx context.Context, members []control.Member) []nodeView {
	out := make([]nodeView, len(members))
	var wg sync.WaitGroup
	client := &http.Client{Timeout: time.Second}
	for i, m := range members {
		out[i] = nodeView{Node: m.Node, HTTP: m.HTTP}
		if m.HTTP == "" {
			out[i].Error = "no HTTP endpoint registered"
			continue
		}
		wg.Go(func() {
			v := &out[i]
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.HTTP+"/status", nil)
			if err != nil {
				v.Error = err.Error()
				return
			}
			resp, err := client.Do(req)
			if err != nil {
				v.Error = err.Error()
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				v.Error = "GET /status: " + resp.Status
				return
			}
			var s node.Status
			if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
				v.Error = "GET /status: " + err.Error()
				return
			}
			v.State, v.Rates, v.Farm = s.State.String(), &s.Rates, s.Farm
		})
	}
	wg.Wait()
	return out
}

// emCredits is the event credit per BU as the leading EM's /status says.
func emCredits(nodes []nodeView) map[string]int64 {
	for _, v := range nodes {
		if v.Farm != nil && v.Farm.IsEM && v.Farm.EMState != nil {
			return v.Farm.EMState.Credits
		}
	}
	return nil
}

func printFarmStatus(w io.Writer, st control.Status, nodes []nodeView) {
	fmt.Fprintf(w, "farm %s\n", st.Farm)
	if st.Run != nil {
		fmt.Fprintf(w, "run %d: %s since %s", st.Run.Run, st.Run.State, st.Run.Since.Format(time.RFC3339))
		if st.Run.By != "" {
			fmt.Fprintf(w, " (by %s)", st.Run.By)
		}
		fmt.Fprintln(w)
	} else {
		fmt.Fprintln(w, "run: never started")
	}
	if st.Config != nil {
		fmt.Fprintf(w, "protocol %s, %d %s per assignment, release %s\n", st.Config.Protocol, st.Config.AssignmentSize, st.Config.Unit, st.Config.Release)
	}
	if st.EM != nil {
		fmt.Fprintf(w, "event manager: %s (epoch %d, incarnation %x)\n", st.EM.Node, st.EM.Epoch, st.EM.Incarnation)
	} else {
		fmt.Fprintln(w, "event manager: none")
	}
	fmt.Fprintf(w, "assignment ids reserved below %d\n", st.Reserved)
	fmt.Fprintf(w, "members: %d\n", len(st.Members))
	if len(st.Members) > 0 {
		tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  NODE\tROLES\tINCARNATION\tADDRESS\tSOURCES\tJOINED")
		ms := append([]control.Member(nil), st.Members...)
		sort.Slice(ms, func(i, j int) bool { return ms[i].Node < ms[j].Node })
		for _, m := range ms {
			src := m.Sources
			if src == "" {
				src = "-"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%x\t%s\t%s\t%s\n", m.Node, m.Roles, m.Incarnation, m.Address, src, m.Joined.Format(time.RFC3339))
		}
		tw.Flush()
	}
	if len(nodes) > 0 {
		printNodeViews(w, nodes)
	}
	if m := st.Mask; m != nil {
		fmt.Fprintf(w, "masked for the rest of the run (by %s): nodes %v, sources %s\n", m.By, m.Nodes, schemas.FormatSourceList(m.SourceIDs()))
	}
	if st.Ledger != nil {
		fmt.Fprint(w, st.Ledger.String())
	}
}
