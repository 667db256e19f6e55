package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/sluice-daq/sluice/internal/conf"
	"github.com/sluice-daq/sluice/internal/synth"
	"github.com/sluice-daq/sluice/node"
	"github.com/sluice-daq/sluice/node/config"
	"github.com/sluice-daq/sluice/node/emulator"
	"github.com/sluice-daq/sluice/node/transport/shm"
	"github.com/sluice-daq/sluice/schemas"
)

func init() { register(newBenchCmd) }

// benchResult is what `sluice bench --json` prints.
type benchResult struct {
	// The flags of the run: --events, --sources, --event-bytes,
	// --packing, --ring-size (bytes), --accept, --instances.
	Events     uint64  `json:"events"`
	Sources    int     `json:"sources"`
	EventBytes int     `json:"event_bytes"`
	Packing    int     `json:"packing"`
	RingBytes  uint64  `json:"ring_bytes"`
	Accept     float64 `json:"accept"`
	Instances  int     `json:"instances"`
	// Seconds is the data's flow (node.Ledger.FlowSeconds): from the
	// first fragment the builder was offered to the last batch stored or
	// released; the rates are over it. RunSeconds is from the inputs
	// opening to the end of the drain (the flow, the wait for the first
	// fragment before it, the shutdown after it: plugin processes, store
	// close), StartupSeconds before that (store and plugins starting).
	Seconds         float64 `json:"seconds"`
	RunSeconds      float64 `json:"run_seconds"`
	StartupSeconds  float64 `json:"startup_seconds"`
	EventsPerSecond float64 `json:"events_per_second"`
	GBPerSecond     float64 `json:"gb_per_second"` // payload bytes received, 1e9 bytes, per second of Seconds
	Accepted        uint64  `json:"events_accepted"`
	Stored          uint64  `json:"events_stored"`
	Balanced        bool    `json:"balanced"`
	// SampleEvents is the emulator's loop: the events it replays,
	// Events / SampleEvents times (--sample-events).
	SampleEvents uint64 `json:"sample_events"`
	// What the emulator wrote into the readout ring, from its summary
	// (node.Ledger.Emulators): the packets' bytes with their headers, and
	// how many of them the ring held from a lap before, so that only the
	// headers were written (a pass that comes round: benchLoop), as a
	// board's DMA costs the node's cores nothing.
	EmulatorBytesSent   uint64 `json:"emulator_bytes_sent"`
	EmulatorBytesPlaced uint64 `json:"emulator_bytes_placed"`
	// What the ledger counts lost or damaged: packets the input could
	// not decode, fragments discarded (every reason), events incomplete
	// and corrupt (a fragment failing its CRC-32C check: bytes in the ring
	// that were not the packet's). The bench's data are clean, so any of
	// them is a defect.
	InputLosses        uint64 `json:"input_losses"`
	FragmentsDiscarded uint64 `json:"fragments_discarded"`
	EventsIncomplete   uint64 `json:"events_incomplete"`
	EventsCorrupt      uint64 `json:"events_corrupt"`
	// BatchesRelieved counts the batches the builder closed partial to
	// hand readout-ring space back (a ring about full of packets held by
	// events of the open batch): more, smaller batches than the events
	// alone make, and no wait for the batch latency.
	BatchesRelieved uint64 `json:"batches_relieved"`
	PeakRSSBytes    uint64 `json:"peak_rss_bytes"` // VmHWM of this process (node and embedded emulator)
	// PeakHeldBytes is the largest anonymous + shared resident memory
	// sampled every 50 ms: VmHWM without file-backed pages (the store reads
	// with pread and maps nothing: they are this executable's own text and
	// data, and the libraries').
	PeakHeldBytes uint64 `json:"peak_anon_shmem_bytes"`
	// The resident set at the end, by kind: heap and stacks, file-backed
	// pages (this executable's text and data), shared memory (the readout
	// ring, plugin regions).
	RSSAnonBytes  uint64 `json:"rss_anon_bytes"`
	RSSFileBytes  uint64 `json:"rss_file_bytes"`
	RSSShmemBytes uint64 `json:"rss_shmem_bytes"`
	BudgetBytes   uint64 `json:"memory_budget_bytes"`
	// CPUSeconds is the CPU time (user + system) of this process, node and
	// embedded emulator, from opening the node to the end of the drain;
	// CPUNsPerByte is it per payload byte received, and CoresBusy it over
	// the same wall time. The plugin processes' CPU is their own.
	CPUSeconds     float64 `json:"cpu_seconds"`
	CPUNsPerByte   float64 `json:"cpu_ns_per_byte"`
	CoresBusy      float64 `json:"cores_busy"`
	MemcpyGBPerSec float64 `json:"baseline_memcpy_gb_per_second"`
	Ratio          float64 `json:"ratio"` // node GB/s / memcpy GB/s
	// Latency is each stage's latency histogram: count, p50 and p99
	// (event building, batch queue, trigger chain, store ack, end to end).
	Latency []node.LatencyStatus `json:"latency"`
}

// newBenchCmd builds `sluice bench`.
func newBenchCmd() *cobra.Command {
	var (
		events              uint64
		sources, eventBytes int
		packing, instances  int
		sampleEvents        uint64
		accept              float64
		budget, plugins     string
		ringSize            string
		cpuProfile          string
		traceFile           string
		memProfile          string
		asJSON              bool
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark the whole node on the embedded emulator, with a memcpy baseline measured in the same run",
		Long: `Runs the node end to end in this process: an embedded readout emulator writes
synthetic events (--sources fragments of --event-bytes/--sources bytes each)
(generated once, replayed in a loop as from a recorded file) into a
shared-memory readout ring, the node builds them, the passthrough
plugin (out of process) accepts 1 in round(1/--accept) by event id, and the
accepted events are stored (sync never) in a temporary store. It prints
events/s, GB/s of payload, the peak RSS of this process (VmHWM) against the
memory budget, and the same bytes copied by memcpy in fragment-sized pieces
as the baseline, with the ratio.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkBenchFlags(events, sampleEvents, sources, eventBytes, packing, instances, accept, ringSize); err != nil {
				return err
			}
			plugin := plugins
			if plugin == "" {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				plugin = filepath.Join(filepath.Dir(exe), "plugins", "passthrough")
			}
			budgetBytes, err := parseBenchBudget(budget)
			if err != nil {
				return err
			}
			dir, err := os.MkdirTemp("", "sluice-bench-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			// The emulator replays pre-generated packets (as from a
			// recorded file): generating detector-like payloads costs more
			// CPU than the node itself, and boards do not share the node's
			// cores.
			sample := filepath.Join(dir, "events.mfp")
			perLoop := sampleEvents
			if perLoop == 0 {
				perLoop = benchLoop(events, sources, eventBytes, packing, ringSize)
			}
			if _, err := emulator.Run(cmd.Context(), emulator.Config{
				To: "file://" + sample, Events: perLoop, Packing: packing,
				Groups:       []schemas.SourceGroup{{Name: "tracker", Sources: seq(sources)}},
				FragmentSize: emulator.SizeDist{Dist: emulator.DistFixed, Mean: conf.ByteSize(eventBytes / sources)},
			}); err != nil {
				return fmt.Errorf("bench: generating the events: %w", err)
			}
			cfg, err := benchConfig(dir, plugin, sample, events/perLoop, sources, eventBytes, packing, instances, accept, budgetBytes, ringSize)
			if least, what := leastBenchBudget(func(b uint64) (*config.Config, error) {
				return parseBenchConfig(dir, plugin, sample, events/perLoop, sources, eventBytes, packing, instances, accept, b, ringSize)
			}); least > 0 && budgetBytes < least {
				return &exitError{code: exitConfig, err: fmt.Errorf("bench: --memory-budget %s: want at least %s for these flags (--ring-size %s): %s",
					budget, conf.ByteSize(least), ringSize, what)}
			}
			if err != nil {
				return &exitError{code: exitConfig, err: err}
			}
			if !asJSON {
				fmt.Fprintf(cmd.OutOrStdout(), "sluice bench: %s x %d B from %s (packing %d, a loop of %d replayed %d times), passthrough accepting 1 in %s out of process, store sync never\n",
					plural(events, "event"), eventBytes, plural(uint64(sources), "source"), packing, perLoop, events/perLoop, cfg.Trigger.Stages[0].Params["prescale"])
			}
			// The profile and the trace cover the node's start-up and run
			// (node, plugin host, embedded emulator) and stop before the
			// memcpy baseline, whose copies would otherwise sit in the
			// same runtime.memmove as the node's.
			stopProfile, stopTrace := func() {}, func() {}
			if cpuProfile != "" {
				if stopProfile, err = startCPUProfile(cpuProfile); err != nil {
					return err
				}
			}
			if traceFile != "" {
				if stopTrace, err = startTrace(traceFile); err != nil {
					stopProfile()
					return err
				}
			}
			r, err := runBench(cmd.Context(), cfg)
			stopTrace()
			stopProfile()
			if err != nil {
				return err
			}
			if memProfile != "" {
				if err := writeAllocsProfile(memProfile); err != nil {
					return err
				}
			}
			r.Events, r.Sources, r.EventBytes, r.SampleEvents = events, sources, eventBytes, perLoop
			r.Packing, r.Accept, r.Instances = packing, accept, instances
			r.RingBytes, _ = humanize.ParseBytes(ringSize)
			r.MemcpyGBPerSec = memcpyGBPerSec(uint64(r.GBPerSecond*1e9*r.Seconds), eventBytes/sources)
			if r.MemcpyGBPerSec > 0 {
				r.Ratio = r.GBPerSecond / r.MemcpyGBPerSec
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			printBench(cmd.OutOrStdout(), r)
			if !r.Balanced {
				return &exitError{code: exitUnbalanced, err: errors.New("bench: the ledger does not balance")}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&events, "events", 20000, "events to send")
	f.IntVar(&sources, "sources", 100, "sources (fragments per event)")
	f.IntVar(&eventBytes, "event-bytes", 100_000, "payload bytes per event")
	f.IntVar(&packing, "packing", 10, "fragments per multi-fragment packet")
	f.Uint64Var(&sampleEvents, "sample-events", 0, "events in the emulator's loop, a divisor of --events (it replays them --events / N times); 0: the largest divisor whose pass fills 15/16 to all of a lap of the readout ring, so that the ring keeps each packet's bytes from the lap before and the emulator writes only its header, as a board's DMA costs the node no CPU (else the largest divisor up to 100 x --packing, every packet copied whole; 1000: more than a 16 MiB ring holds, every packet copied)")
	f.Float64Var(&accept, "accept", 0.1, "fraction of events the trigger accepts")
	f.IntVar(&instances, "instances", 1, "plugin processes of the trigger stage (trigger.stages[].instances)")
	f.StringVar(&budget, "memory-budget", "256MiB", "the node's memory budget (node.memory_budget: everything it allocates or maps)")
	f.StringVar(&ringSize, "ring-size", "16MiB", "the readout ring's data region (inputs[].emulator.ring_size), a power of two")
	f.StringVar(&plugins, "plugin", "", "passthrough plugin binary (default: plugins/passthrough beside this executable)")
	f.BoolVar(&asJSON, "json", false, "print the figures as JSON")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the node's start-up and run (node and embedded emulator; not the event generation nor the memcpy baseline) to this file")
	f.StringVar(&memProfile, "memprofile", "", "write a Go allocation profile (every allocation since the start, sampled; go tool pprof -sample_index=alloc_space) to this file after the run, before the memcpy baseline")
	f.StringVar(&traceFile, "trace", "", "write a Go execution trace of the node's start-up and run (not the memcpy baseline) to this file (go tool trace: where goroutines wait)")
	return cmd
}

// checkBenchFlags refuses the flags no run can take, as configuration
// errors (exitConfig) naming the flag, before anything is built: the
// configuration made of them would name its own fields instead.
func checkBenchFlags(events, sampleEvents uint64, sources, eventBytes, packing, instances int, accept float64, ringSize string) error {
	bad := func(format string, args ...any) error {
		return &exitError{code: exitConfig, err: fmt.Errorf("bench: "+format, args...)}
	}
	switch {
	case sources < 1:
		return bad("--sources %d: want at least 1", sources)
	case eventBytes < synth.HeaderSize*sources:
		return bad("--event-bytes %d: want at least %d bytes per source (the synthetic payload's header; --sources %d)", eventBytes, synth.HeaderSize, sources)
	case packing < 1 || packing > 1<<20:
		return bad("--packing %d: want 1 to %d fragments per packet", packing, 1<<20)
	case events == 0:
		return bad("--events 0: want at least 1")
	case sampleEvents > 0 && (sampleEvents > events || events%sampleEvents != 0):
		return bad("--sample-events %d: want a divisor of --events %d", sampleEvents, events)
	case instances < 1:
		return bad("--instances %d: want at least 1 plugin process", instances)
	case !(accept > 0 && accept <= 1):
		return bad("--accept %g: want a fraction in (0, 1]", accept)
	}
	ring, err := humanize.ParseBytes(ringSize)
	if err != nil || !shm.ValidRingSize(ring) {
		return bad("--ring-size %q: want a power of two between %s and %s", ringSize, conf.ByteSize(shm.MinRingSize), conf.ByteSize(shm.MaxRingSize))
	}
	return nil
}

// benchLoop is the number of events the emulator replays in a loop for
// --events events: the largest divisor of events whose pass comes round in
// the readout ring (ringSize, valid) at the same places
// (shm.PassComesRound: it fits a lap and leaves at most 1/16 of it over),
// so that the ring keeps the packets' bytes and only their headers are
// written again (shm.Writer.WritePlaced): what a board's DMA costs the
// node's cores, nothing, where an emulator copying every byte would take a
// fifth of the node's CPU. When no divisor does (a lap smaller than a
// packing block, or none of the divisors near a lap), the largest divisor
// up to 100 x packing or a lap's worth of events, whichever is more, every
// packet copied whole at every pass (events that fit a lap: one pass).
func benchLoop(events uint64, sources, eventBytes, packing int, ringSize string) uint64 {
	ring, _ := humanize.ParseBytes(ringSize)
	frag := eventBytes / sources
	// pass is the ring space of a loop of n events: n/packing blocks of
	// one packet per source, then a packet per source of the rest.
	record := func(fragments int) uint64 {
		sizes := make([]int, fragments)
		for i := range sizes {
			sizes[i] = frag
		}
		return uint64(sources) * shm.RecordBytes(schemas.MFPLen(sizes, 3)) // the emulator's MFPs are 8-byte aligned
	}
	block := record(packing)
	pass := func(n uint64) uint64 {
		b := n / uint64(packing) * block
		if r := n % uint64(packing); r > 0 {
			b += record(int(r))
		}
		return b
	}
	// Events take at least block/packing ring bytes each: no longer loop
	// fits a lap.
	fit := ring / (block / uint64(packing))
	for d := min(events/2, fit); d >= 1; d-- {
		if events%d == 0 && shm.PassComesRound(pass(d), ring) {
			return d
		}
	}
	return largestDivisor(events, max(uint64(100*packing), fit))
}

// largestDivisor is the largest divisor of n (n >= 1) that is at most max.
func largestDivisor(n, max uint64) uint64 {
	for d := min(n, max); d > 1; d-- {
		if n%d == 0 {
			return d
		}
	}
	return 1
}

// plural is n and noun, with an s unless n is 1.
func plural(n uint64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.FormatUint(n, 10) + " " + noun + "s"
}

// parseBenchBudget parses --memory-budget s, a byte size ("256MiB"); a
// malformed or zero size is a configuration error (exitConfig) naming the
// flag.
func parseBenchBudget(s string) (uint64, error) {
	b, err := humanize.ParseBytes(s)
	if err != nil || b == 0 {
		return 0, &exitError{code: exitConfig, err: fmt.Errorf("bench: --memory-budget %q: want a byte size such as 256MiB or 1GiB", s)}
	}
	return b, nil
}

// leastBenchBudget is the least memory budget, in bytes rounded up to a
// MiB, at which mk's configuration validates (each part of the split at
// its minimum: the inputs' share must hold the ring) and holds this
// process's fixed memory (config.MinimumBudget), with what the latter is
// made of; 0 when no budget up to 64GiB validates (another flag's
// problem, which the configuration reports).
func leastBenchBudget(mk func(budget uint64) (*config.Config, error)) (uint64, string) {
	const maxMiB = 64 << 10
	valid := func(mib uint64) bool { _, err := mk(mib << 20); return err == nil }
	if !valid(maxMiB) {
		return 0, ""
	}
	lo, hi := uint64(0), uint64(maxMiB) // lo refused (or 0), hi valid
	for hi-lo > 1 {
		if m := (lo + hi) / 2; valid(m) {
			hi = m
		} else {
			lo = m
		}
	}
	cfg, err := mk(hi << 20)
	if err != nil {
		return 0, ""
	}
	min, what := cfg.MinimumBudget(config.MeasureFixedMemory())
	if split := hi << 20; split > min {
		return split, fmt.Sprintf("the memory split's shares need %dMiB (each part at its minimum, the inputs' share holding the ring)", hi)
	}
	return (min + 1<<20 - 1) &^ (1<<20 - 1), what
}

// benchConfig is the node configuration of a bench run, with a memory
// budget of budget bytes, parsed and checked like any other.
func benchConfig(dir, plugin, sample string, loop uint64, sources, eventBytes, packing, instances int, accept float64, budget uint64, ringSize string) (*config.Config, error) {
	c, err := parseBenchConfig(dir, plugin, sample, loop, sources, eventBytes, packing, instances, accept, budget, ringSize)
	if err == nil {
		err = c.Preflight()
	}
	return c, err
}

// parseBenchConfig is benchConfig parsed and validated, not preflighted
// (the plugin not started).
func parseBenchConfig(dir, plugin, sample string, loop uint64, sources, eventBytes, packing, instances int, accept float64, budget uint64, ringSize string) (*config.Config, error) {
	text := fmt.Sprintf(`
node: {id: bench, memory_budget: %d}
inputs:
  - uri: shm://sluice-bench-%d
    emulator: {from: %q, loop: %d, ring_size: %s}
sources: [{name: tracker, sources: "0-%d"}]
builder: {batch_events: 64}
trigger:
  stages:
    - {name: hlt, plugin: %q, instances: %d, params: {prescale: "%d"}}
store: {path: %q, sync: never, min_free_bytes: 256MiB, gc_interval: 1h}
http: {address: "off"}
log: {level: warn}
`, budget, os.Getpid(), sample, loop, ringSize, sources-1, plugin, instances, max(1, int(1/accept+0.5)), filepath.Join(dir, "store"))
	return config.Parse([]byte(text))
}

// seq returns the source ids 0..n-1.
func seq(n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(i)
	}
	return out
}

// runBench runs the node and measures it.
func runBench(ctx context.Context, cfg *config.Config) (benchResult, error) {
	log, limiter := node.NewLogger(os.Stderr, cfg.Log)
	if err := applyMemoryLimit(cfg); err != nil {
		return benchResult{}, err
	}
	cpu0, wall0 := cpuSeconds(), time.Now()
	n, err := node.New(cfg, node.Options{Logger: log, Limiter: limiter})
	if err != nil {
		return benchResult{}, err
	}
	// VmHWM counts file-backed pages too (this executable's text, which
	// no part of the budget holds); sample what the node allocates,
	// anonymous and shared memory, to report its peak separately.
	var peakHeld uint64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			peakHeld = max(peakHeld, procStatus("RssAnon")+procStatus("RssShmem"))
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	l, err := n.Run(ctx)
	cpu, wall := cpuSeconds()-cpu0, time.Since(wall0).Seconds()
	close(done)
	<-sampled
	if err != nil && !errors.Is(err, node.ErrUnbalanced) {
		return benchResult{}, err
	}
	r := benchResult{
		Accepted: l.EventsAccepted, Stored: l.EventsStored, Balanced: l.Balanced, BatchesRelieved: l.BatchesRelieved,
		InputLosses: sumCounts(l.InputLosses), FragmentsDiscarded: sumCounts(l.FragmentsDiscarded),
		EventsIncomplete: l.EventsIncomplete, EventsCorrupt: l.EventsCorrupt,
		BudgetBytes: uint64(cfg.Node.MemoryBudget), PeakRSSBytes: procStatus("VmHWM"), PeakHeldBytes: peakHeld,
		RSSAnonBytes: procStatus("RssAnon"), RSSFileBytes: procStatus("RssFile"), RSSShmemBytes: procStatus("RssShmem"),
	}
	// The rates are over the data's flow, from the first fragment to the
	// last batch finished with: what the node moves per second, as the
	// baseline is the copy alone. What comes before (start-up, the
	// inputs and the emulator opening) and after (the shutdown) is
	// reported, not counted: fixed costs that weigh on a short run and
	// not on a fill.
	r.RunSeconds = l.DurationSeconds - l.StartupSeconds
	if d := l.FlowSeconds; d > 0 {
		r.Seconds = d
		r.EventsPerSecond = float64(l.EventsBuilt) / d
		r.GBPerSecond = float64(l.BytesReceived) / d / 1e9
	}
	r.StartupSeconds = l.StartupSeconds
	for _, e := range l.Emulators {
		r.EmulatorBytesSent += e.BytesSent
		r.EmulatorBytesPlaced += e.BytesPlaced
	}
	r.Latency = n.Status().Latency
	r.CPUSeconds, r.CoresBusy = cpu, cpu/wall
	if l.BytesReceived > 0 {
		r.CPUNsPerByte = cpu * 1e9 / float64(l.BytesReceived)
	}
	return r, nil
}

// sumCounts is the total of counts by reason.
func sumCounts(m map[string]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}

// memcpyGBPerSec copies total bytes in piece-sized copies (the granularity
// of the node's one copy, fragment by fragment) from a 64 MiB source into
// a preallocated 64 MiB destination, and returns GB/s. Both buffers are
// touched first: fresh pages are slow on these machines.
func memcpyGBPerSec(total uint64, piece int) float64 {
	const size = 64 << 20
	src, dst := make([]byte, size), make([]byte, size)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src)
	piece = max(piece, 1)
	start := time.Now()
	var done uint64
	for done < total {
		// Invariant: off+piece <= size, so each copy moves exactly piece bytes.
		for off := 0; off+piece <= size && done < total; off += piece {
			copy(dst[off:off+piece], src[off:off+piece])
			done += uint64(piece)
		}
	}
	return float64(done) / time.Since(start).Seconds() / 1e9
}

// cpuSeconds is this process's CPU time so far, user and system.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// procStatus reads a memory figure (e.g. "VmHWM", "RssFile") of this
// process from /proc/self/status, in bytes (0 when unavailable).
func procStatus(field string) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// overUnder says d MiB as "12 MiB over" or "3 MiB under".
func overUnder(d float64) string {
	if d < 0 {
		return fmt.Sprintf("%.0f MiB under", -d)
	}
	return fmt.Sprintf("%.0f MiB over", d)
}

// emulatorWrites says how the emulator wrote r's packets into the ring:
// which share of the bytes the ring held from a lap before (headers
// written only, as a board's DMA) and which it copied.
func emulatorWrites(r benchResult) string {
	if r.EmulatorBytesSent == 0 {
		return "nothing sent"
	}
	placed := 100 * float64(r.EmulatorBytesPlaced) / float64(r.EmulatorBytesSent)
	if r.EmulatorBytesPlaced == 0 {
		return fmt.Sprintf("%s written, every byte copied (no pass of the loop comes round in the ring: its CPU is the node's)", humanize.IBytes(r.EmulatorBytesSent))
	}
	return fmt.Sprintf("%s written, %.1f %% of it already in the ring from a lap before (headers written only, as a board's DMA), the rest copied (the first pass and every later packet's header)",
		humanize.IBytes(r.EmulatorBytesSent), placed)
}

func printBench(w io.Writer, r benchResult) {
	mib := func(b uint64) float64 { return float64(b) / (1 << 20) }
	fmt.Fprintf(w, "node end to end     %10.0f events/s  %6.3f GB/s  (%s in %.2f s of data flow; %d accepted, %d stored; balanced %v)\n",
		r.EventsPerSecond, r.GBPerSecond, plural(r.Events, "event"), r.Seconds, r.Accepted, r.Stored, r.Balanced)
	fmt.Fprintf(w, "lost or damaged     %8d     (packets the input lost %d, fragments discarded %d, events incomplete %d, corrupt %d; expected 0: the data are clean)\n",
		r.InputLosses+r.FragmentsDiscarded+r.EventsIncomplete+r.EventsCorrupt, r.InputLosses, r.FragmentsDiscarded, r.EventsIncomplete, r.EventsCorrupt)
	fmt.Fprintf(w, "emulator            %s replayed %d times (--sample-events): %s\n",
		plural(r.SampleEvents, "event"), r.Events/max(r.SampleEvents, 1), emulatorWrites(r))
	fmt.Fprintf(w, "run                 %8.2f s  from the inputs opening to drained: %.2f s more than the flow (the wait for the first fragment before it, the shutdown after it); start-up before that %.2f s\n",
		r.RunSeconds, r.RunSeconds-r.Seconds, r.StartupSeconds)
	fmt.Fprintf(w, "baseline memcpy                        %6.3f GB/s  (same bytes in %d-byte pieces)   ratio %.3f\n",
		r.MemcpyGBPerSec, r.EventBytes/r.Sources, r.Ratio)
	fmt.Fprintf(w, "batches relieved    %8d     (partial batches closed early to free an almost full readout ring; 0: none needed)\n",
		r.BatchesRelieved)
	fmt.Fprintf(w, "CPU                 %8.2f s  %.3f ns per payload byte, %.2f cores busy on average (this process, node and emulator, start-up to drained; not the plugins)\n",
		r.CPUSeconds, r.CPUNsPerByte, r.CoresBusy)
	fmt.Fprintf(w, "peak RSS (VmHWM)    %8.0f MiB  %s the %.0f MiB memory budget, this executable's own pages included (target: at most 64 MiB over)\n",
		mib(r.PeakRSSBytes), overUnder(mib(r.PeakRSSBytes)-mib(r.BudgetBytes)), mib(r.BudgetBytes))
	fmt.Fprintf(w, "peak anon+shmem     %8.0f MiB  %s the budget (VmHWM less this executable's file-backed pages)\n",
		mib(r.PeakHeldBytes), overUnder(mib(r.PeakHeldBytes)-mib(r.BudgetBytes)))
	fmt.Fprintf(w, "RSS at the end      %8.0f MiB anonymous, %.0f MiB file-backed (this executable's text and data), %.0f MiB shared memory (ring, plugin regions)\n",
		mib(r.RSSAnonBytes), mib(r.RSSFileBytes), mib(r.RSSShmemBytes))
	for _, s := range r.Latency {
		fmt.Fprintf(w, "latency %-20s p50 %9.3f ms  p99 %9.3f ms  (%s)\n", s.Name, 1e3*s.P50, 1e3*s.P99, plural(s.Count, "sample"))
	}
}
