package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sluice-daq/sluice/internal/texttable"
	"github.com/sluice-daq/sluice/node"
	"github.com/sluice-daq/sluice/node/config"
	"github.com/sluice-daq/sluice/storage"
)

func init() { register(newReplayCmd) }

// newReplayCmd builds `sluice replay --config FILE [--rate HZ] [--runs R]
// [--events R] [--summary-json FILE]`.
func newReplayCmd() *cobra.Command {
	var (
		file, summary, runs, events, store string
		rate                               float64
		stages                             []string
	)
	cmd := &cobra.Command{
		Use:   "replay --config FILE",
		Short: "Trigger the deferred events of the node's store with the replay stages, exactly once",
		Long: `Replay reads the deferred stream of the configured store in (run, event id)
order, runs the replay trigger stages (replay.stages, or the stages marked
when: replay/both, or all) on each batch, and commits each batch's outcomes in
one transaction: accepted events move to the accepted stream, rejected ones
are removed, deferred ones stay. Stopped at any point (SIGINT/SIGTERM, kill)
and started again, it decides every deferred event exactly once; stopped by
a signal it ends as a whole replay does, its summary balanced with the
store's ledger (the batch committed at the signal included), exit 0. A progress
bar with rate and ETA is shown on a terminal, plain lines every second
otherwise. A summary that does not balance exits with status 2.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd, file, config.PreflightReplay, func(cfg *config.Config) error {
				if len(stages) > 0 {
					cfg.Replay.Stages = stages
				}
				if store != "" {
					cfg.Store.Dir = store
				}
				if cmd.Flags().Changed("rate") {
					cfg.Replay.Rate = rate
				}
				// Replay works on an existing store; opening a missing one
				// would create it empty and replay nothing.
				if _, err := os.Stat(cfg.Store.Dir); err != nil {
					return fmt.Errorf("store %s: %w (run `sluice run` first, or give --store)", cfg.Store.Dir, err)
				}
				return nil
			})
			if err != nil {
				return err
			}
			sel, err := parseSelection(runs, events)
			if err != nil {
				return &exitError{code: exitConfig, err: err}
			}
			log, _ := node.NewLogger(os.Stderr, cfg.Log)
			if err := applyMemoryLimit(cfg); err != nil {
				return err
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			stop := onSignals(func(bool) { log.Info("signal: stopping replay after the current batch"); cancel() })
			defer stop()

			p := newReplayProgress(cmd.ErrOrStderr())
			s, err := node.RunReplay(ctx, cfg, sel, log, p.update)
			p.finish(s)
			if errors.Is(err, node.ErrNoReplayStage) {
				return &exitError{code: exitConfig, err: err}
			}
			if errors.Is(err, context.Canceled) {
				err = nil // a stopped replay is a clean replay: what was committed is final
			}
			if werr := writeReplaySummary(cmd.OutOrStdout(), &s, summary); werr != nil {
				return errors.Join(err, werr)
			}
			if s.NotStarted != "" && err != nil {
				return &exitError{code: exitNotStarted, err: err}
			}
			if err == nil && !s.Balanced {
				return &exitError{code: exitUnbalanced, err: errors.New("replay summary does not balance with the store's ledger")}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&file, "config", "", "node configuration (YAML): store and trigger stages")
	cmd.Flags().Float64Var(&rate, "rate", 0, "events per second at most (0: unlimited; default replay.rate)")
	cmd.Flags().StringVar(&runs, "runs", "", "runs to replay: N or FIRST-LAST (default all)")
	cmd.Flags().StringVar(&events, "events", "", "event ids to replay within each run: N or FIRST-LAST (default all)")
	cmd.Flags().StringSliceVar(&stages, "stages", nil, "trigger stages to run (default replay.stages, or the stages marked when: replay)")
	cmd.Flags().StringVar(&summary, "summary-json", "", "write the replay summary as JSON to this file")
	cmd.Flags().StringVar(&store, "store", "", "event store directory (overrides store.path)")
	_ = cmd.MarkFlagRequired("config")
	return cmd
}

// parseSelection turns --runs and --events ("N" or "FIRST-LAST") into a
// storage selection.
func parseSelection(runs, events string) (storage.Selection, error) {
	var sel storage.Selection
	if runs != "" {
		lo, hi, err := parseRange(runs, 32)
		if err != nil {
			return sel, fmt.Errorf("--runs: %w", err)
		}
		sel.MinRun, sel.MaxRun = uint32(lo), uint32(hi)
	}
	if events != "" {
		lo, hi, err := parseRange(events, 64)
		if err != nil {
			return sel, fmt.Errorf("--events: %w", err)
		}
		sel.MinEvent, sel.MaxEvent = lo, hi
	}
	return sel, nil
}

func parseRange(s string, bits int) (lo, hi uint64, err error) {
	a, b, isRange := strings.Cut(s, "-")
	if lo, err = strconv.ParseUint(strings.TrimSpace(a), 10, bits); err != nil {
		return 0, 0, fmt.Errorf("%q: want N or FIRST-LAST", s)
	}
	hi = lo
	if isRange {
		if hi, err = strconv.ParseUint(strings.TrimSpace(b), 10, bits); err != nil || hi < lo {
			return 0, 0, fmt.Errorf("%q: want N or FIRST-LAST with FIRST <= LAST", s)
		}
	}
	if hi == 0 {
		return 0, 0, fmt.Errorf("%q: the upper bound must be > 0 (0 means no bound)", s)
	}
	return lo, hi, nil
}

// replayProgress shows a progress bar with rate and ETA on a terminal, and
// a plain line at most once per second otherwise.
type replayProgress struct {
	w    io.Writer
	bar  *progressbar.ProgressBar
	last time.Time
}

func newReplayProgress(w io.Writer) *replayProgress { return &replayProgress{w: w} }

func (p *replayProgress) update(s node.ReplaySummary) {
	rate, eta := replayRate(s)
	if p.bar == nil && isTerminalWriter(p.w) {
		p.bar = newReplayBar(p.w, s.Selected)
	}
	if p.bar != nil {
		p.bar.Describe(fmt.Sprintf("replay %.0f events/s, ETA %s", rate, eta))
		_ = p.bar.Set64(int64(s.Replayed))
		return
	}
	if time.Since(p.last) < time.Second {
		return
	}
	p.last = time.Now()
	fmt.Fprintf(p.w, "replay: %d/%d events (%.0f events/s, accepted %d, rejected %d, kept %d), ETA %s\n",
		s.Replayed, s.Selected, rate, s.Accepted, s.Rejected, s.Kept, eta)
}

// newReplayBar is replay's progress bar of total events on w. The bar's
// own events/s and its elapsed:left time are left out: it times the jumps
// between its updates (a whole batch in microseconds at first), not the
// replay. The replay's own clock gives them, in the description (one ETA).
func newReplayBar(w io.Writer, total uint64) *progressbar.ProgressBar {
	return progressbar.NewOptions64(int64(total),
		progressbar.OptionSetWriter(w), progressbar.OptionSetDescription("replay"),
		progressbar.OptionShowCount(), progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetPredictTime(false), progressbar.OptionShowElapsedTimeOnFinish())
}

// replayRate is the replay's rate so far (events over the replay's own
// elapsed time, which includes its --rate waits) and the time left at it.
func replayRate(s node.ReplaySummary) (rate float64, eta string) {
	rate = float64(s.Replayed) / max(s.DurationSeconds, 1e-9)
	eta = "?"
	if rate > 0 && s.Selected >= s.Replayed {
		eta = time.Duration(float64(s.Selected-s.Replayed) / rate * float64(time.Second)).Round(time.Second).String()
	}
	return rate, eta
}

func (p *replayProgress) finish(node.ReplaySummary) {
	if p.bar != nil {
		_ = p.bar.Finish()
		fmt.Fprintln(p.w)
	}
}

func isTerminalWriter(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// writeReplaySummary prints the summary table and writes the JSON file.
func writeReplaySummary(w io.Writer, s *node.ReplaySummary, file string) error {
	if s.NotStarted != "" {
		// Not an all-zero table reading "balanced NO".
		fmt.Fprintf(w, "replay did not start: %s\n", s.NotStarted)
		return writeReplayJSON(s, file)
	}
	var tb texttable.Table
	tb.Row("replay", fmt.Sprintf("%.1f s", s.DurationSeconds))
	tb.Row("deferred events selected", s.Selected)
	tb.Row("replayed", s.Replayed)
	tb.Row("  accepted", s.Accepted)
	// The accepted events by the line that accepted them, under their total.
	for _, k := range slices.Sorted(maps.Keys(s.Lines)) {
		tb.Row("    line "+k, s.Lines[k])
	}
	tb.Row("  rejected", s.Rejected)
	tb.Row("  kept deferred", s.Kept)
	tb.Row("still deferred", s.Remaining)
	verdict := "yes"
	if !s.Balanced {
		verdict = "NO"
	}
	tb.Row("balanced with the store ledger", verdict)
	s.Memory.TableRows(&tb)
	if _, err := tb.WriteTo(w); err != nil {
		return err
	}
	return writeReplayJSON(s, file)
}

// writeReplayJSON writes the summary as JSON to file ("": not).
func writeReplayJSON(s *node.ReplaySummary, file string) error {
	if file == "" {
		return nil
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(b, '\n'), 0o644)
}
