package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/cobra"

	"github.com/sluice-daq/sluice/internal/gzfile"
	"github.com/sluice-daq/sluice/internal/synth"
	"github.com/sluice-daq/sluice/node/config"
	"github.com/sluice-daq/sluice/plugins"
	"github.com/sluice-daq/sluice/plugins/sdk/scaffold"
	"github.com/sluice-daq/sluice/plugins/sdk/triggertest"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/storage"
)

func init() { register(newPluginCmd) }

func newPluginCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugin",
		Short: "Write and check trigger plugins",
	}
	cmd.AddCommand(newPluginNewCmd(), newPluginCheckCmd(), newPluginDiffCmd())
	return cmd
}

func newPluginNewCmd() *cobra.Command {
	var sluiceDir, dir string
	cmd := &cobra.Command{
		Use:   "new NAME",
		Short: "Write a ready-to-build trigger plugin project in ./NAME",
		Long: `Writes a trigger plugin project (main.go, main_test.go, Makefile, README.md,
go.mod, go.sum) that builds and tests offline against a local sluice checkout:
its go.mod replaces ` + scaffold.Module + ` with that directory, given by
--sluice-dir or else found from where this sluice binary was built, from the
binary's location, or from the working directory.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := scaffold.CheckName(name); err != nil {
				return fmt.Errorf("plugin new: %w", err)
			}
			var src string
			var err error
			if sluiceDir != "" {
				if src, err = scaffold.CheckSluiceDir(sluiceDir); err != nil {
					return fmt.Errorf("plugin new: --sluice-dir %w", err)
				}
			} else if src, err = scaffold.FindSluiceDir(); err != nil {
				return fmt.Errorf("plugin new: %w; give --sluice-dir", err)
			}
			if dir == "" {
				dir = name
			}
			if err := scaffold.Write(dir, name, src, scaffold.Command()); err != nil {
				return fmt.Errorf("plugin new: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote plugin project %s in %s (sluice checkout %s)\nnext: cd %s && make test && make check   # builds bin/%s and runs sluice plugin check on it\n",
				name, dir, src, dir, name)
			return nil
		},
	}
	cmd.Flags().StringVar(&sluiceDir, "sluice-dir", "", "local sluice checkout to build against (default: detected)")
	cmd.Flags().StringVar(&dir, "dir", "", "directory to write the project into (default ./NAME); must not exist")
	return cmd
}

func newPluginCheckCmd() *cobra.Command {
	var params []string
	var events int
	var seed uint64
	var inline bool
	var src checkSource
	stf := storeFlags{budget: config.Default().Node.MemoryBudget.String()} // the store takes its default share
	cmd := &cobra.Command{
		Use:   "check BINARY [--from FILE | --store DIR [--stream S]]",
		Short: "Start a trigger plugin, check its handshake, describe it and run it on synthetic or real events",
		Long: `Starts the plugin binary (for a project written by plugin new: bin/NAME,
built by make build), checks the handshake, prints its description and its
decision on events, at most --events of them: by default synthetic events of
the emulator's ECAL, HCAL and muon sources, whose sizes are drawn from --seed
over 160 to 2560 payload bytes, every 8th event from the 4th corrupt (a
fragment failing its CRC), every 8th from the 7th incomplete (a muon source
missing), so that the check sees more than one decision; with --from FILE the
events of a file of any format sluice splits (LHCb MDF or MEP, VDIF, CMS FRD
or FEROL, ATLAS eformat, BESIII raw, sluice fragments), built as a node
builds them; with --store DIR the events of a node's store (--stream
accepted or deferred). A plugin that reads source groups (its description's
columns) the events do not have is warned about: it would see them empty.
The counts per decision close the output.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			if err := checkStartable(path); err != nil {
				return fmt.Errorf("plugin check: %w", err)
			}
			p := map[string]string{}
			for _, kv := range params {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return fmt.Errorf("plugin check: --param %q: want KEY=VALUE", kv)
				}
				p[k] = v
			}
			if events <= 0 {
				return errors.New("plugin check: --events must be positive")
			}
			if src.from != "" && stf.path != "" {
				return &exitError{code: exitConfig, err: errors.New("plugin check: --from and --store exclude each other")}
			}
			src.store = &stf
			return checkPlugin(cmd, path, p, events, seed, inline, &src)
		},
	}
	cmd.Flags().StringVar(&src.from, "from", "", "decide the events of this file (any format sluice splits) instead of synthetic ones")
	cmd.Flags().StringVar(&stf.path, "store", "", "decide the events of this node store instead of synthetic ones")
	cmd.Flags().StringVar(&src.stream, "stream", "accepted", "with --store: the stream, accepted or deferred")
	cmd.Flags().StringArrayVar(&params, "param", nil, "plugin parameter KEY=VALUE (repeatable)")
	cmd.Flags().IntVar(&events, "events", 16, "synthetic events to decide")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of the synthetic events' sizes and payloads")
	cmd.Flags().BoolVar(&inline, "inline", false, "send the batch in the gRPC request instead of shared memory")
	return cmd
}

// checkStartable returns an error saying what to pass instead when path
// cannot be started as a plugin: a directory (such as the project plugin new
// writes) or a file without execute permission (such as its main.go).
// Without it the user gets the handshake error of a failed fork/exec.
func checkStartable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	switch {
	case fi.IsDir():
		bin, ok := scaffold.ProjectBinary(path)
		if !ok {
			return fmt.Errorf("%s is a directory; pass the plugin binary", path)
		}
		return fmt.Errorf("%s is a directory; build it (make build) and pass the binary, e.g. %s%s", path, bin, notBuilt(bin))
	case fi.Mode().Perm()&0o111 == 0:
		if bin, ok := scaffold.ProjectBinary(filepath.Dir(path)); ok {
			return fmt.Errorf("%s is not executable (mode %s); build the project (make build) and pass the binary, e.g. %s%s", path, fi.Mode(), bin, notBuilt(bin))
		}
		return fmt.Errorf("%s is not executable (mode %s); pass the plugin binary", path, fi.Mode())
	}
	return nil
}

// notBuilt says so when bin does not exist yet.
func notBuilt(bin string) string {
	if _, err := os.Stat(bin); err != nil {
		return " (not built yet)"
	}
	return ""
}

// protocolLine names the service and the handshake version the plugin
// settled on with this host (triggertest.Binary's runner is the
// *plugins.Plugin that plugins.Start returns), and what that version means
// for a node.
func protocolLine(r triggertest.Runner) string {
	p, ok := r.(*plugins.Plugin)
	if !ok {
		return "sluice.trigger.v1, handshake version unknown"
	}
	what := "one call at a time"
	if p.Protocol() == plugins.ProtocolPipelined {
		what = fmt.Sprintf("pipelined: a node with an arena sends up to %d calls at once", plugins.CallsInFlight)
	}
	return fmt.Sprintf("sluice.trigger.v1, handshake version %d (%s)", p.Protocol(), what)
}

// checkStage labels the plugin's log lines (plugins.Options.Stage).
const checkStage = "check"

// checkPlugin starts the plugin, prints its description, and prints its
// decision on each of a batch of synthetic events (see checkEvents) and the
// count per decision.
func checkPlugin(cmd *cobra.Command, path string, params map[string]string, events int, seed uint64, inline bool, src *checkSource) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
	defer cancel()
	out := cmd.OutOrStdout()
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	r, err := triggertest.Binary(ctx, path, params, plugins.Options{Inline: inline, Logger: log, Stage: checkStage, StartTimeout: 20 * time.Second})
	if err != nil {
		return fmt.Errorf("plugin check: %w", err)
	}
	defer r.Close()
	d := r.Description()
	columns := "all"
	if len(d.Columns) > 0 {
		columns = strings.Join(d.Columns, ", ")
	}
	fmt.Fprintf(out, "plugin   %s\nname     %s\nversion  %s\nprotocol %s (handshake ok)\nlines    %s\ncolumns  %s\n",
		path, d.Name, d.Version, protocolLine(r), strings.Join(d.Lines, ", "), columns)
	// What the plugin was given, row by row in the order of res.
	var bytes []int
	var status []schemas.EventStatus
	var res []triggertest.Decision
	warned := false
	err = src.each(memory.NewGoAllocator(), events, seed, func(rec arrow.RecordBatch) error {
		ev, err := schemas.NewEventBatch(rec)
		if err != nil {
			return err
		}
		if missing := missingGroups(d.Columns, ev.Groups); len(missing) > 0 && !warned {
			warned = true
			fmt.Fprintf(out, "\nwarning: the plugin reads source groups %s, which these events do not have (they have %s): it sees them empty\n",
				strings.Join(missing, ", "), groupNames(ev.Groups))
		}
		for i := range ev.Len() {
			n := 0
			for g := range ev.Groups {
				n += len(ev.GroupPayload(g, i))
			}
			bytes = append(bytes, n)
			status = append(status, ev.Status(i))
		}
		got, err := triggertest.Run(ctx, r, []arrow.RecordBatch{rec})
		res = append(res, got...)
		return err
	})
	if err != nil {
		return fmt.Errorf("plugin check: %w", err)
	}
	if len(res) == 0 {
		return fmt.Errorf("plugin check: %s holds no events", src)
	}
	fmt.Fprintf(out, "\n%-10s %6s %-18s %-8s %s\n", "event id", "bytes", "status", "decision", "lines")
	var count [4]int
	for k, x := range res {
		var lines []string
		for _, name := range schemas.FiredLines(x.Lines, d.Lines) {
			lines = append(lines, name)
		}
		note := ""
		if x.Reason.Text != "" {
			note = "  (" + x.Reason.Text + ")"
		}
		fmt.Fprintf(out, "%-10d %6d %-18s %-8s %s%s\n", x.EventID, bytes[k], statusText(status[k]), x.Decision, strings.Join(lines, ","), note)
		count[x.Decision&3]++
	}
	fmt.Fprintf(out, "\n%d events: %d %s, %d %s, %d %s\n", len(res),
		count[schemas.DecisionAccept], schemas.DecisionAccept, count[schemas.DecisionReject], schemas.DecisionReject,
		count[schemas.DecisionDefer], schemas.DecisionDefer)
	return nil
}

// checkSource is where plugin check takes its events from: a file
// (--from), a store (--store, --stream) or else synthetic events.
type checkSource struct {
	from   string
	store  *storeFlags
	stream string
}

func (s *checkSource) String() string {
	switch {
	case s.from != "":
		return s.from
	case s.store != nil && s.store.path != "":
		return fmt.Sprintf("the %s stream of %s", s.stream, s.store.path)
	}
	return "the synthetic batch"
}

// checkBatch is how many events go to the plugin at a time from a file or
// a store.
const checkBatch = 64

// each calls fn with batches of at most n events in all, each released
// when fn returns.
func (s *checkSource) each(mem memory.Allocator, n int, seed uint64, fn func(arrow.RecordBatch) error) error {
	limit := func(batches []arrow.RecordBatch) error {
		defer triggertest.Release(batches)
		for _, rec := range batches {
			if n <= 0 {
				return nil
			}
			k := min(int64(n), rec.NumRows())
			part := rec.NewSlice(0, k)
			err := fn(part)
			part.Release()
			if err != nil {
				return err
			}
			n -= int(k)
		}
		return nil
	}
	switch {
	case s.from != "":
		b, err := gzfile.ReadFile(s.from)
		if err != nil {
			return err
		}
		batches, err := triggertest.File(mem, b, checkBatch)
		if err != nil {
			return fmt.Errorf("--from %s: %w", s.from, err)
		}
		return limit(batches)
	case s.store != nil && s.store.path != "":
		stream, err := storage.ParseStream(s.stream)
		if err != nil {
			return &exitError{code: exitConfig, err: fmt.Errorf("--stream: %w", err)}
		}
		st, err := s.store.open()
		if err != nil {
			return fmt.Errorf("--store: %w", err)
		}
		defer st.Close()
		cur, err := st.NewCursor(stream, storage.CursorOptions{BatchSize: min(n, checkBatch), Mem: mem})
		if err != nil {
			return fmt.Errorf("--store: %w", err)
		}
		defer cur.Close()
		for n > 0 {
			b, err := cur.Next()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("--store: %w", err)
			}
			k := min(int64(n), b.Rec.NumRows())
			part := b.Rec.NewSlice(0, k)
			err = fn(part)
			part.Release()
			b.Release()
			if err != nil {
				return err
			}
			n -= int(k)
		}
		return nil
	}
	batches, err := checkEvents(mem, n, seed)
	if err != nil {
		return fmt.Errorf("synthetic events: %w", err)
	}
	return limit(batches)
}

// missingGroups returns the source groups of columns (a plugin's
// description: the groups it reads; empty means all) that groups lack.
func missingGroups(columns []string, groups []schemas.SourceGroup) []string {
	var out []string
	for _, c := range columns {
		if !slices.ContainsFunc(groups, func(g schemas.SourceGroup) bool { return g.Name == c }) {
			out = append(out, c)
		}
	}
	return out
}

// groupNames lists groups' names, at most eight.
func groupNames(groups []schemas.SourceGroup) string {
	names := make([]string, 0, len(groups))
	for _, g := range groups {
		names = append(names, g.Name)
	}
	if len(names) > 8 {
		names = append(names[:8], fmt.Sprintf("... (%d groups)", len(groups)))
	}
	return strings.Join(names, ", ")
}

// statusText names an event's status bits ("ok" for none).
func statusText(s schemas.EventStatus) string {
	if s == 0 {
		return "ok"
	}
	return strings.Join(s.Names(), ",")
}

// Fragment sizes of the synthetic events: an event's mean payload bytes per
// source is log-uniform over [checkMinFragment, checkMaxFragment], each
// source's size within ±50 % of it (synth.Spec.SpreadSizes). The emulator's
// payloads are whole 8-byte records.
const (
	checkMinFragment = 16
	checkMaxFragment = 256
)

// checkEvents returns n synthetic events, ids 1…n, in one batch: the
// emulator's sources and payloads (synth.Events) with sizes drawn from
// seed, every 8th event from the 4th with its first fragment failing its
// CRC (corrupt) and every 8th from the 7th without its first muon source
// (incomplete). They go through the native fragment stream
// (triggertest.Native), as a node would build them. The caller releases
// the batches.
func checkEvents(mem memory.Allocator, n int, seed uint64) ([]arrow.RecordBatch, error) {
	groups := synth.DefaultGroups()
	var stream []byte
	for _, ev := range synth.Events(synth.Spec{FirstEventID: 1, Events: n, Groups: groups, Seed: seed,
		SpreadSizes: [2]int{checkMinFragment, checkMaxFragment}, Faults: true}) {
		for gi, g := range groups {
			for si, src := range g.Sources {
				p := ev.Fragments[gi][si]
				if p == nil {
					continue
				}
				f := schemas.Fragment{SourceID: src, EventID: ev.ID, Payload: p, CRC: schemas.Checksum(p)}
				if slices.Contains(ev.Corrupt, src) {
					f.CRC ^= 1
				}
				stream = schemas.AppendFragment(stream, &f, false)
			}
		}
	}
	return triggertest.Native(mem, stream, groups, n)
}
