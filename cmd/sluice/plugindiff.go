package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/cobra"

	"github.com/sluice-daq/sluice/node/config"
	"github.com/sluice-daq/sluice/plugins"
	"github.com/sluice-daq/sluice/plugins/sdk/triggertest"
	"github.com/sluice-daq/sluice/schemas"
)

func newPluginDiffCmd() *cobra.Command {
	var paramsA, paramsB []string
	var events, show int
	var seed uint64
	var src checkSource
	stf := storeFlags{budget: config.Default().Node.MemoryBudget.String()}
	cmd := &cobra.Command{
		Use:   "diff A B [--from FILE | --store DIR [--stream S]]",
		Short: "Run two trigger plugins on the same events and compare their decisions, as a shadow stage does",
		Long: `Starts plugin binaries A (production) and B (the candidate, as a stage's
shadow), decides the same events with both, and prints how their decisions
compare by the rules of a node's shadow stage: events compared, agreeing
(the same decision and, for an accept, the same lines by name), differing
by (A, B) decision and by line, and the first --show differing event ids
with both decisions. The events are those plugin check takes: at most
--events of a file (--from FILE, any format sluice splits), of a node's
store (--store DIR, --stream accepted or deferred) or synthetic ones
(--seed). --param-a and --param-b give each plugin its parameters.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var paths [2]string
			for i, a := range args {
				p, err := filepath.Abs(a)
				if err != nil {
					return err
				}
				if err := checkStartable(p); err != nil {
					return fmt.Errorf("plugin diff: %w", err)
				}
				paths[i] = p
			}
			var params [2]map[string]string
			for i, list := range [][]string{paramsA, paramsB} {
				params[i] = map[string]string{}
				for _, kv := range list {
					k, v, ok := strings.Cut(kv, "=")
					if !ok || k == "" {
						return &exitError{code: exitConfig, err: fmt.Errorf("plugin diff: --param-%c %q: want KEY=VALUE", 'a'+i, kv)}
					}
					params[i][k] = v
				}
			}
			if events <= 0 || show < 0 {
				return &exitError{code: exitConfig, err: errors.New("plugin diff: --events must be positive and --show not negative")}
			}
			if src.from != "" && stf.path != "" {
				return &exitError{code: exitConfig, err: errors.New("plugin diff: --from and --store exclude each other")}
			}
			src.store = &stf
			return diffPlugins(cmd, paths, params, events, seed, show, &src)
		},
	}
	cmd.Flags().StringVar(&src.from, "from", "", "decide the events of this file (any format sluice splits) instead of synthetic ones")
	cmd.Flags().StringVar(&stf.path, "store", "", "decide the events of this node store instead of synthetic ones")
	cmd.Flags().StringVar(&src.stream, "stream", "accepted", "with --store: the stream, accepted or deferred")
	cmd.Flags().StringArrayVar(&paramsA, "param-a", nil, "parameter KEY=VALUE of plugin A (repeatable)")
	cmd.Flags().StringArrayVar(&paramsB, "param-b", nil, "parameter KEY=VALUE of plugin B (repeatable)")
	cmd.Flags().IntVar(&events, "events", 1000, "events to decide, at most")
	cmd.Flags().IntVar(&show, "show", 20, "differing events to list")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of the synthetic events' sizes and payloads")
	return cmd
}

// diffPlugins decides the events of src with both plugins and prints the
// comparison.
func diffPlugins(cmd *cobra.Command, paths [2]string, params [2]map[string]string, events int, seed uint64, show int, src *checkSource) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Minute)
	defer cancel()
	out := cmd.OutOrStdout()
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	var rs [2]triggertest.Runner
	for i := range rs {
		r, err := triggertest.Binary(ctx, paths[i], params[i], plugins.Options{Logger: log, Stage: "diff", StartTimeout: 20 * time.Second})
		if err != nil {
			return fmt.Errorf("plugin diff: %w", err)
		}
		defer r.Close()
		rs[i] = r
	}
	d := triggertest.NewDiffer(rs[0], rs[1])
	var listed []triggertest.Diff
	err := src.each(memory.NewGoAllocator(), events, seed, func(rec arrow.RecordBatch) error {
		got, err := d.Decide(ctx, rec)
		listed = append(listed, got[:min(len(got), show-len(listed))]...)
		return err
	})
	if err != nil {
		return fmt.Errorf("plugin diff: %w", err)
	}
	res := d.Result()
	if res.Compared == 0 {
		return fmt.Errorf("plugin diff: %s holds no events", src)
	}
	for i, label := range []string{"A (production)", "B (shadow)    "} {
		desc := rs[i].Description()
		fmt.Fprintf(out, "%s %s: %s %s, lines %s\n", label, paths[i], desc.Name, desc.Version, strings.Join(desc.Lines, ", "))
	}
	fmt.Fprintf(out, "\n%d events of %s: %d agreeing, %d differing (%.2f%%)\n", res.Compared, src, res.Agreeing, res.Differ(),
		100*float64(res.Differ())/float64(res.Compared))
	if len(res.Differing) > 0 {
		fmt.Fprintln(out, "\ndiffering by decision:")
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  A\tB\tevents")
		for _, p := range res.Differing {
			fmt.Fprintf(tw, "  %s\t%s\t%d\n", p.Production, p.Shadow, p.Events)
		}
		tw.Flush()
	}
	if len(res.Lines) > 0 {
		fmt.Fprintln(out, "\ndiffering by line (events it fired on for one side only):")
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  line\tonly A\tonly B")
		for _, l := range res.Lines {
			fmt.Fprintf(tw, "  %s\t%d\t%d\n", l.Line, l.OnlyProduction, l.OnlyShadow)
		}
		tw.Flush()
	}
	if len(listed) > 0 {
		fmt.Fprintf(out, "\nfirst %d differing events:\n", len(listed))
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  event id\tA\tA lines\tB\tB lines")
		la, lb := rs[0].Description().Lines, rs[1].Description().Lines
		for _, x := range listed {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", x.EventID, x.A.Decision, firedNames(x.A.Lines, la), x.B.Decision, firedNames(x.B.Lines, lb))
		}
		tw.Flush()
	}
	return nil
}

// firedNames is the names of the lines set in lines, comma-separated ("-"
// for none).
func firedNames(lines uint64, names []string) string {
	var out []string
	for _, n := range schemas.FiredLines(lines, names) {
		out = append(out, n)
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}
