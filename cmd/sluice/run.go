package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluice-daq/sluice/node"
	"github.com/sluice-daq/sluice/node/config"
	"github.com/sluice-daq/sluice/node/farm/agent"
)

func init() { register(newRunCmd) }

// Exit statuses of `sluice run` and `sluice replay` besides 0 and 1.
const (
	exitUnbalanced = 2 // the ledger does not add up
	exitConfig     = 3 // the configuration has problems; nothing was started
	// The run did not start: it failed before its first event (a file
	// its emulator cannot replay, an input or a plugin that cannot start,
	// a store that cannot open...); the ledger says why, and the run is
	// not recorded as ended (the same run number can be taken again).
	// A replay that fails before its first batch exits with it too.
	exitNotStarted = 4
)

// newRunCmd builds `sluice run --config FILE [--run N] [--summary-json FILE]`.
func newRunCmd() *cobra.Command {
	var (
		file, summary, httpAddr, store string
		cpuProfile                     string
		runNumber                      int64
		protocol                       string
		rerun, noProgress              bool
		etcd                           []string
	)
	cmd := &cobra.Command{
		Use:   "run --config FILE",
		Short: "Run the node: readout inputs -> event builder -> trigger chain -> store, until SIGINT/SIGTERM, POST /run/stop or the end of finite input",
		Long: `Run the node. The configuration is validated first (every problem is listed
with its field path, and nothing is opened when there is one). The run then
goes idle -> configured -> running -> draining -> stopped. SIGINT or SIGTERM
(or POST /run/stop on the HTTP endpoint) drains: inputs stop, open events are
completed or timed out, the chain finishes and the store flushes. A second
signal aborts at once. At the end the ledger is printed (and written as JSON
with --summary-json); a ledger that does not balance exits with status 2, a
configuration with problems with status 3, and a run that failed before
its first event with status 4 (its ledger says it did not start, and why).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd, file, config.PreflightRun, func(cfg *config.Config) error {
				if cmd.Flags().Changed("run") {
					if runNumber < 0 || runNumber > 1<<32-1 {
						return fmt.Errorf("--run %d: want a run number 0..4294967295", runNumber)
					}
					cfg.Run = uint32(runNumber)
				}
				if httpAddr != "" {
					cfg.HTTP.Address = httpAddr
				}
				if store != "" {
					cfg.Store.Dir = store
				}
				cfg.Rerun = rerun
				if protocol != "" {
					cfg.Farm.Protocol = protocol
				}
				if len(etcd) > 0 {
					cfg.Farm.Etcd = etcd
				}
				return nil
			})
			if err != nil {
				return err
			}
			// On a terminal one progress line, the logs written above it;
			// elsewhere the logs only, as they are.
			var logw io.Writer = cmd.ErrOrStderr()
			progress := newRunProgress(cmd.ErrOrStderr())
			if progress != nil && !noProgress {
				logw = progress
			} else {
				progress = nil
			}
			log, limiter := node.NewLogger(logw, cfg.Log)
			if err := applyMemoryLimit(cfg); err != nil {
				return err
			}
			raiseFileLimit(log)
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			n, err := node.New(cfg, node.Options{Logger: log, Limiter: limiter})
			if err != nil {
				return err
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			stopSignals := onSignals(func(first bool) {
				if first {
					log.Info("signal: draining (send again to abort)")
					n.Stop()
					return
				}
				log.Warn("second signal: aborting")
				cancel()
			})
			defer stopSignals()
			stopProgress := func() {}
			if progress != nil {
				stop, done := make(chan struct{}), make(chan struct{})
				go func() { defer close(done); progress.watch(n.Status, stop) }()
				stopProgress = func() { close(stop); <-done }
			}
			l, runErr := n.Run(ctx)
			stopProgress() // the line cleared before the ledger is printed
			return finishLedger(cmd, &l, summary, runErr)
		},
	}
	cmd.Flags().StringVar(&file, "config", "", "node configuration (YAML; see: sluice config default)")
	cmd.Flags().Int64Var(&runNumber, "run", 0, "run number (overrides the config's run)")
	cmd.Flags().StringVar(&summary, "summary-json", "", "write the end-of-run ledger as JSON to this file")
	cmd.Flags().StringVar(&httpAddr, "http", "", "HTTP address for /metrics, /status, /healthz, /readyz, POST /run/stop (overrides http.address)")
	cmd.Flags().StringVar(&store, "store", "", "event store directory (overrides store.path)")
	cmd.Flags().BoolVar(&rerun, "rerun", false, "take a run number that already ended on the store again, replacing its stored events (refused otherwise, exit 3; a run killed before its end is resumed without it)")
	cmd.Flags().StringVar(&protocol, "protocol", "", "farm node: push or pull (overrides farm.protocol; must be the run's, see sluice farm start)")
	cmd.Flags().StringSliceVar(&etcd, "etcd", nil, "farm node: etcd endpoints host:port,... (override farm.etcd)")
	cmd.Flags().BoolVar(&noProgress, "no-progress", false, "no live progress line on a terminal (logs only)")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the node process to this file")
	_ = cmd.MarkFlagRequired("config")
	return cmd
}

// loadConfig loads and validates file ("-": standard input), lets override
// apply command-line settings, validates again and checks what the config
// names on this machine (preflight), listing every problem of both. Any
// problem exits with exitConfig before anything opens.
func loadConfig(cmd *cobra.Command, file string, preflight config.Preflight, override func(*config.Config) error) (*config.Config, error) {
	cfg, err := readConfig(cmd, file)
	if cfg != nil && err == nil && override != nil {
		if err = override(cfg); err != nil {
			return nil, &exitError{code: exitConfig, err: err}
		}
	}
	if err := checkConfig(file, cfg, err, preflight); err != nil {
		return nil, &exitError{code: exitConfig, err: err}
	}
	return cfg, nil
}

// startCPUProfile starts a CPU profile into file; stop ends it.
func startCPUProfile(file string) (stop func(), err error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// writeAllocsProfile writes the allocation profile (every sampled
// allocation since the process started) to file.
func writeAllocsProfile(file string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// startTrace writes a Go execution trace to file until stop is called.
func startTrace(file string) (stop func(), err error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { trace.Stop(); f.Close() }, nil
}

// applyMemoryLimit sets Go's soft memory limit to the memory budget less
// what lies outside the Go heap (config.MemoryPlan.GoMemLimit), so the
// garbage collector works harder before the heap takes more than its
// parts, unless GOMEMLIMIT says otherwise.
//
// It refuses (a configuration error) a budget below the least that holds
// this process's fixed memory (its executable's pages, the runtime's
// floor) and the parts' minimums: config.MinimumBudget.
func applyMemoryLimit(cfg *config.Config) error {
	if err := cfg.CheckMemoryMinimum(config.MeasureFixedMemory()); err != nil {
		return &exitError{code: exitConfig, err: err}
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(int64(cfg.Memory().GoMemLimit))
	}
	return nil
}

// finishLedger prints the ledger, writes the summary and turns the run's
// error into the exit status.
func finishLedger(cmd *cobra.Command, l *node.Ledger, summary string, runErr error) error {
	if err := l.WriteTable(cmd.OutOrStdout()); err != nil {
		return err
	}
	if summary != "" {
		if err := l.WriteJSON(summary); err != nil {
			return errors.Join(runErr, err)
		}
	}
	if errors.Is(runErr, node.ErrRerun) || errors.Is(runErr, agent.ErrRefused) {
		// A run recorded as done, or a farm run this node's configuration
		// does not match (or that was never recorded): configuration.
		return &exitError{code: exitConfig, err: runErr}
	}
	if l.NotStarted != "" && runErr != nil {
		return &exitError{code: exitNotStarted, err: runErr}
	}
	if errors.Is(runErr, node.ErrUnbalanced) {
		return &exitError{code: exitUnbalanced, err: runErr}
	}
	return runErr
}

// onSignals calls fn(true) on the first SIGINT/SIGTERM and fn(false) on
// each later one, until the returned stop func is called.
func onSignals(fn func(first bool)) (stop func()) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		first := true
		for {
			select {
			case <-ch:
				fn(first)
				first = false
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}
