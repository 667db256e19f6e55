package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/sluice-daq/sluice/node/farm/farmbench"
)

// parseSizes reads a comma-separated list of byte sizes ("256,4KiB").
func parseSizes(flag, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		b, err := humanize.ParseBytes(strings.TrimSpace(f))
		if err != nil || b == 0 || b > 1<<30 {
			return nil, &exitError{code: exitConfig, err: fmt.Errorf("farm bench: --%s %q: want sizes such as 256,4KiB (1 B … 1 GiB)", flag, f)}
		}
		out = append(out, int(b))
	}
	return out, nil
}

// formatSizes is parseSizes' inverse.
func formatSizes(sizes []int) string {
	var s []string
	for _, b := range sizes {
		s = append(s, humanize.IBytes(uint64(b)))
	}
	return strings.Join(s, ",")
}

func newFarmBenchCmd() *cobra.Command {
	var c farmbench.Config
	def := farmbench.DefaultConfig()
	var sizes, queues, plot string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "bench [--plot FILE.png] [--json]",
		Short: "Push vs pull: N RUs into one BU through a shaped link (network namespace, veth, tc); root only",
		Long: `Measures the farm's two protocols the way a switch port towards a BU meets
them: RUs (one process each, on the host) send one fragment per event to one BU
(with the event manager, in a network namespace of its own) through a veth
pair whose host side is shaped by tc tbf (--rate, --burst, and a queue of
--queues bytes). Every fragment size is measured with both protocols at every
queue limit, each point a farm of its own on one sluice farm etcd; assignment
size 1, release received.

Push sends a burst of credits × RUs fragments at the queue; pull (max_requests
1) one fragment at a time, one round trip each. The predicted crossover, the
size above which pull builds more events per second, is
(queue + burst) / (credits × RUs); the table shows it next to the measured one
for each queue limit, and --plot draws events/s and latency against fragment
size. Needs root (ip netns, tc); exits 3 otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if c.Sizes, err = parseSizes("sizes", sizes); err != nil {
				return err
			}
			if c.Queues, err = parseSizes("queues", queues); err != nil {
				return err
			}
			if c.Exe, err = os.Executable(); err != nil {
				return err
			}
			if !asJSON {
				c.Log = cmd.ErrOrStderr()
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := farmbench.Bench(ctx, c)
			if errors.Is(err, farmbench.ErrNotRoot) {
				return &exitError{code: exitConfig, err: err}
			}
			if err != nil {
				return err
			}
			if plot != "" {
				if err := farmbench.Plot(res, plot); err != nil {
					return err
				}
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			printFarmBench(cmd, res)
			if plot != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "plot: %s\n", plot)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&c.RUs, "rus", def.RUs, "readout units (processes), one source each")
	f.StringVar(&sizes, "sizes", formatSizes(def.Sizes), "fragment sizes")
	f.StringVar(&queues, "queues", formatSizes(def.Queues), "the link's queue limits (tbf limit)")
	f.StringVar(&c.Rate, "rate", def.Rate, "the link's rate (tc syntax)")
	f.IntVar(&c.Burst, "burst", def.Burst, "tbf bucket, bytes")
	f.IntVar(&c.Credits, "credits", def.Credits, "events in flight per BU: push credits, pull outstanding assignments")
	f.IntVar(&c.Window, "window", 0, "fragments each RU keeps unreleased at most (0: 2 × credits + 1)")
	f.DurationVar(&c.Warmup, "warmup", def.Warmup, "per point, before measuring")
	f.DurationVar(&c.Measure, "measure", def.Measure, "per point, the measurement")
	f.StringVar(&plot, "plot", "", "write a PNG plot of events/s and latency against fragment size")
	f.BoolVar(&asJSON, "json", false, "print the points as JSON")
	return cmd
}

func printFarmBench(cmd *cobra.Command, r *farmbench.Result) {
	w := cmd.OutOrStdout()
	c := r.Config
	fmt.Fprintf(w, "%d RUs → 1 BU, link %s (tbf burst %d B), %d credit(s), assignment size 1\n", c.RUs, c.Rate, c.Burst, c.Credits)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "queue\tfragment\tpush ev/s\tpull ev/s\tpull/push\tpush p50\tpull p50\tpush p99\tpull p99\tpush drops\tpull drops\t")
	byKey := map[[3]int]farmbench.Point{}
	for _, p := range r.Points {
		k := 0
		if p.Protocol == "pull" {
			k = 1
		}
		byKey[[3]int{p.Queue, p.Size, k}] = p
	}
	for _, q := range c.Queues {
		for _, s := range c.Sizes {
			push, pull := byKey[[3]int{q, s, 0}], byKey[[3]int{q, s, 1}]
			ratio := 0.0
			if push.EventsPerSec > 0 {
				ratio = pull.EventsPerSec / push.EventsPerSec
			}
			note := ""
			if s >= q {
				note = "  fragment ≥ queue"
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t%.2f\t%v\t%v\t%v\t%v\t%d\t%d\t%s\n", humanize.IBytes(uint64(q)), humanize.IBytes(uint64(s)),
				push.EventsPerSec, pull.EventsPerSec, ratio, push.P50.Round(time.Microsecond), pull.P50.Round(time.Microsecond),
				push.P99.Round(time.Microsecond), pull.P99.Round(time.Microsecond), push.Drops, pull.Drops, note)
		}
	}
	tw.Flush()
	for _, q := range c.Queues {
		fmt.Fprintf(w, "queue %s: crossover predicted %s ((queue + burst) / (credits × RUs)), measured %s\n",
			humanize.IBytes(uint64(q)), humanize.IBytes(uint64(r.Predicted[q])), measuredCrossover(r, q))
	}
}

// measuredCrossover says the measured crossover of queue q, or why there
// is none: the crossover is the smallest size from which pull builds at
// least farmbench.Margin times push's events per second and no fewer than
// push at any larger size below the queue limit, so one larger size where
// pull is slower (noise, or the link's burst) leaves none even when a
// smaller size shows pull far ahead.
func measuredCrossover(r *farmbench.Result, q int) string {
	if s := r.Measured[q]; s > 0 {
		return fmt.Sprintf("%s (pull ≥ %.1f× push there, and ≥ push at every larger size below the queue)", humanize.IBytes(uint64(s)), farmbench.Margin)
	}
	rate := map[[2]int]float64{}
	var sizes []int
	for _, p := range r.Points {
		if p.Queue != q || p.Size >= q {
			continue
		}
		if p.Protocol == "pull" {
			rate[[2]int{p.Size, 1}] = p.EventsPerSec
		} else {
			rate[[2]int{p.Size, 0}] = p.EventsPerSec
			sizes = append(sizes, p.Size)
		}
	}
	slices.Sort(sizes)
	best, bestSize := 0.0, 0
	for i := len(sizes) - 1; i >= 0; i-- {
		push, pull := rate[[2]int{sizes[i], 0}], rate[[2]int{sizes[i], 1}]
		if pull < push {
			m := fmt.Sprintf("none: pull/push %.2f at %s, below the queue limit; the crossover wants pull ≥ %.1f× push at a size and ≥ push at every larger one",
				pull/push, humanize.IBytes(uint64(sizes[i])), farmbench.Margin)
			for _, s := range sizes[:i] {
				if rs := rate[[2]int{s, 1}] / rate[[2]int{s, 0}]; rs >= farmbench.Margin && rs > best {
					best, bestSize = rs, s
				}
			}
			if bestSize > 0 {
				m += fmt.Sprintf(" (pull/push %.2f at the smaller %s)", best, humanize.IBytes(uint64(bestSize)))
			}
			return m
		}
	}
	if len(sizes) == 0 {
		return "none: no fragment size below the queue limit was run"
	}
	return fmt.Sprintf("none: pull < %.1f× push at every fragment size below the queue limit", farmbench.Margin)
}

// newFarmBenchUnitCmd is one process of farm bench (hidden: the bench
// starts it).
func newFarmBenchUnitCmd(ff *farmFlags) *cobra.Command {
	var u farmbench.UnitConfig
	var run, src uint
	cmd := &cobra.Command{
		Use:    "bench-unit",
		Short:  "One RU or the BU of sluice farm bench (started by it)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			u.Run, u.Source, u.Farm = uint32(run), uint32(src), ff.farm
			if len(ff.etcd) != 1 {
				return &exitError{code: exitConfig, err: errors.New("farm bench-unit: want one --etcd endpoint")}
			}
			u.Etcd = ff.etcd[0]
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return farmbench.RunUnit(ctx, u, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&u.BU, "bu", false, "the BU (and EM); else an RU")
	f.StringVar(&u.Node, "node", "", "node id")
	f.UintVar(&run, "run", 1, "run number")
	f.StringVar(&u.Listen, "listen", "127.0.0.1:0", "peer transport address")
	f.UintVar(&src, "source", 0, "RU: its source")
	f.IntVar(&u.Size, "size", 1024, "RU: fragment bytes")
	f.IntVar(&u.Window, "window", 3, "RU: fragments unreleased at most")
	f.IntVar(&u.Credits, "credits", 1, "BU: events in flight")
	f.DurationVar(&u.Warmup, "warmup", 500*time.Millisecond, "BU: before measuring")
	f.DurationVar(&u.Measure, "measure", 2*time.Second, "BU: the measurement")
	return cmd
}
