package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/sluice-daq/sluice/node/config"
	"github.com/sluice-daq/sluice/schemas"
	"github.com/sluice-daq/sluice/schemas/formats"
	"github.com/sluice-daq/sluice/storage"
	"github.com/sluice-daq/sluice/storage/storeflight"
)

func init() { register(newStoreCmd) }

// newStoreCmd builds `sluice store stat|ls|export --path DIR ...`, the tools
// to look into a node's event store and take events out of it.
func newStoreCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Inspect and export a node's event store (accepted, deferred, void and shadow streams)",
	}
	cmd.AddCommand(newStoreStatCmd(), newStoreLsCmd(), newStoreWhyCmd(), newStoreExportCmd())
	return cmd
}

// storeFlags are the flags every store subcommand has.
type storeFlags struct {
	path    string
	recover bool
	budget  string
}

func (f *storeFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.path, "path", "", "store directory")
	cmd.Flags().StringVar(&f.budget, "memory-budget", config.Default().Node.MemoryBudget.String(),
		"memory budget (as node.memory_budget): the store takes its default share, Go's heap the rest")
	cmd.Flags().BoolVar(&f.recover, "recover", false, "if the store was not closed cleanly, recover it first (a read-write open that drops the unacknowledged tail of its logs)")
}

// storeReader is what the store commands read: the store itself, or a
// running node's store through its Arrow Flight endpoint.
type storeReader interface {
	Stats() (storage.Stats, error)
	List(stream storage.Stream, sel storage.Selection, limit int, fn func(storage.EventInfo) bool) error
	Why(run uint32, id uint64) (storage.Why, error)
	ExportBatches(stream storage.Stream, opts storage.ExportOptions, start func(*arrow.Schema) error, each func(arrow.RecordBatch) error) (int, error)
	Close() error
}

// reader opens the store as open does or, when a running node holds it,
// connects to the node's Arrow Flight endpoint that the store directory
// names (saying so on stderr): the output is the same either way.
func (f *storeFlags) reader(cmd *cobra.Command) (storeReader, error) {
	s, err := f.open()
	if err == nil || !errors.Is(err, storage.ErrLocked) {
		return s, err
	}
	ep, eerr := storeflight.ReadEndpoint(f.path)
	if eerr != nil {
		return nil, fmt.Errorf("%w; and it names no Arrow Flight endpoint to read it through (%v): is flight.listen off in the node's configuration?", err, eerr)
	}
	c, cerr := storeflight.Dial(cmd.Context(), ep)
	if cerr != nil {
		return nil, fmt.Errorf("%w; its node's Arrow Flight endpoint %s: %v", err, ep.URI, cerr)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "store %s is in use by a running node: reading it through its Arrow Flight endpoint %s\n", f.path, ep.URI)
	return remoteStore{c, f.path}, nil
}

// remoteStore is a store read through Flight, its directory named as the
// user named it (the node names it as its own configuration does).
type remoteStore struct {
	*storeflight.Client
	dir string
}

func (r remoteStore) Stats() (storage.Stats, error) {
	st, err := r.Client.Stats()
	st.Dir = r.dir
	return st, err
}

// open opens the store read-only (the node must not hold it), after a
// recovering read-write open when --recover is given and it is needed.
func (f *storeFlags) open() (*storage.Store, error) {
	if f.path == "" {
		return nil, errors.New("--path: the store directory is required")
	}
	if _, err := os.Stat(f.path); err != nil {
		return nil, fmt.Errorf("--path: %w", err)
	}
	mem, err := f.memory()
	if err != nil {
		return nil, err
	}
	s, err := storage.Open(storage.Options{Dir: f.path, ReadOnly: true, MemoryBytes: mem})
	if !errors.Is(err, storage.ErrNeedsRecovery) {
		return s, err
	}
	if !f.recover {
		return nil, fmt.Errorf("%w (run again with --recover)", err)
	}
	rw, err := storage.Open(storage.Options{Dir: f.path, MinFreeBytes: 1, MemoryBytes: mem})
	if err != nil {
		return nil, fmt.Errorf("--recover: %w", err)
	}
	if err := rw.Close(); err != nil {
		return nil, fmt.Errorf("--recover: %w", err)
	}
	return storage.Open(storage.Options{Dir: f.path, ReadOnly: true, MemoryBytes: mem})
}

// memory parses --memory-budget (refused below config.StoreMinimumBudget),
// sets Go's soft memory limit to it less the
// store's mapped files (unless GOMEMLIMIT is set) and returns the store's
// share: the same split as a node's, whose other parts a store command
// does not have, go to the Go heap (export's decoded batches).
func (f *storeFlags) memory() (int64, error) {
	b, err := humanize.ParseBytes(f.budget)
	if err != nil || b < 64<<20 {
		return 0, &exitError{code: exitConfig, err: fmt.Errorf("--memory-budget %q: want a byte size of at least 64MiB, e.g. 512MiB", f.budget)}
	}
	if min, what := config.StoreMinimumBudget(config.MeasureFixedMemory()); b < min {
		return 0, &exitError{code: exitConfig, err: fmt.Errorf("--memory-budget %s: want at least %s, the memory this process holds whatever the split: %s",
			f.budget, humanize.IBytes(min), what)}
	}
	store := int64(config.DefaultMemorySplit().Store.Of(b))
	if os.Getenv("GOMEMLIMIT") == "" {
		o := storage.Options{MemoryBytes: store}
		debug.SetMemoryLimit(int64(b) - o.MappedBound())
	}
	return store, nil
}

func newStoreStatCmd() *cobra.Command {
	var sf storeFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stat --path DIR",
		Short: "Streams, events, bytes, runs, first and last event (by run and event id), disk use, replay ledger",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := sf.reader(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			st, err := s.Stats()
			if err != nil {
				return err
			}
			if asJSON {
				return writeStatJSON(cmd.OutOrStdout(), st)
			}
			return writeStat(cmd.OutOrStdout(), st)
		},
	}
	sf.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func formatTS(ns uint64) string {
	if ns == 0 {
		return "-"
	}
	return time.Unix(0, int64(ns)).UTC().Format(time.RFC3339Nano)
}

func writeStat(w io.Writer, st storage.Stats) error {
	fmt.Fprintf(w, "store %s\n", st.Dir)
	fmt.Fprintf(w, "  mode %s, %d source groups", orDash(string(st.Mode)), len(st.Groups))
	for _, g := range st.Groups {
		fmt.Fprintf(w, " %s[%s]", g.Name, schemas.FormatSourceList(g.Sources))
	}
	fmt.Fprintf(w, "\n  disk %d bytes used, %d bytes free\n", st.DiskBytes, st.FreeBytes)
	fmt.Fprintf(w, "  replay ledger: %d accepted, %d rejected, %d kept deferred\n", st.Ledger.Accepted, st.Ledger.Rejected, st.Ledger.Kept)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "stream\tevents\tbytes\truns\tfirst by run/event (its time)\tlast by run/event (its time)")
	for _, ss := range st.Streams {
		oldest, newest := "-", "-"
		if ss.Events > 0 {
			oldest = fmt.Sprintf("%d/%d %s", ss.Oldest.Run, ss.Oldest.EventID, formatTS(ss.OldestTS))
			newest = fmt.Sprintf("%d/%d %s", ss.Newest.Run, ss.Newest.EventID, formatTS(ss.NewestTS))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", ss.Stream, ss.Events, ss.Bytes, orDash(schemas.FormatSourceList(ss.Runs)), oldest, newest)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

type statStreamJSON struct {
	Stream   string   `json:"stream"`
	Events   uint64   `json:"events"`
	Bytes    int64    `json:"bytes"`
	Runs     []uint32 `json:"runs"`
	Oldest   [2]any   `json:"oldest"` // [run, event id]: the first in key order (the lowest run's), not the earliest in time
	Newest   [2]any   `json:"newest"` // the last in key order
	OldestTS uint64   `json:"oldest_timestamp_ns"`
	NewestTS uint64   `json:"newest_timestamp_ns"`
}

func writeStatJSON(w io.Writer, st storage.Stats) error {
	out := struct {
		Dir       string            `json:"dir"`
		Mode      string            `json:"mode"`
		Groups    map[string]string `json:"groups"`
		DiskBytes uint64            `json:"disk_bytes"`
		FreeBytes uint64            `json:"free_bytes"`
		Ledger    storage.Ledger    `json:"ledger"`
		Streams   []statStreamJSON  `json:"streams"`
	}{Dir: st.Dir, Mode: string(st.Mode), Groups: map[string]string{}, DiskBytes: st.DiskBytes, FreeBytes: st.FreeBytes, Ledger: st.Ledger}
	for _, g := range st.Groups {
		out.Groups[g.Name] = schemas.FormatSourceList(g.Sources)
	}
	for _, ss := range st.Streams {
		out.Streams = append(out.Streams, statStreamJSON{Stream: ss.Stream.String(), Events: ss.Events, Bytes: ss.Bytes, Runs: ss.Runs,
			Oldest: [2]any{ss.Oldest.Run, ss.Oldest.EventID}, Newest: [2]any{ss.Newest.Run, ss.Newest.EventID},
			OldestTS: ss.OldestTS, NewestTS: ss.NewestTS})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// selectionFlags are the event filters shared by ls and export.
type selectionFlags struct {
	stream string
	runs   string
	events string
	limit  int
}

func (f *selectionFlags) add(cmd *cobra.Command, defStream string) {
	cmd.Flags().StringVar(&f.stream, "stream", defStream, "stream: accepted, deferred, void (tombstones) or shadow (the shadow plugins' differing events)")
	cmd.Flags().StringVar(&f.runs, "runs", "", "runs: N or FIRST-LAST")
	cmd.Flags().StringVar(&f.events, "events", "", "event ids within each run: N or FIRST-LAST")
	cmd.Flags().IntVar(&f.limit, "limit", 0, "events at most (0: all)")
}

func (f *selectionFlags) parse() (storage.Stream, storage.Selection, error) {
	stream, err := storage.ParseStream(f.stream)
	if err != nil {
		return 0, storage.Selection{}, fmt.Errorf("--stream: %w", err)
	}
	if f.limit < 0 {
		return 0, storage.Selection{}, fmt.Errorf("--limit %d: must be >= 0", f.limit)
	}
	sel, err := parseSelection(f.runs, f.events)
	return stream, sel, err
}

func newStoreLsCmd() *cobra.Command {
	var stf storeFlags
	var sf selectionFlags
	cmd := &cobra.Command{
		Use:   "ls --path DIR [--stream S] [--runs A-B] [--events A-B] [--limit N]",
		Short: "List stored events with their metadata, in (run, event id) order",
		Long: `Lists the selected events of a stream, one line each: run, event id,
timestamp, status, fragments, decision, the trigger lines that fired (named
as the deciding stage's plugin declares them; lineN where the store has no
name), the stage that decided, the reason (for the node's own reasons spelt
as the run ledger counts them: stage gec with reason fraction is the
ledger's gec/fraction) and the stored bytes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stream, sel, err := sf.parse()
			if err != nil {
				return err
			}
			s, err := stf.reader(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			// The line names the store recorded (also served through a
			// node's Flight endpoint, its "lines" action).
			var names map[string][]string
			if ln, ok := s.(interface {
				LineNames() (map[string][]string, error)
			}); ok {
				if names, err = ln.LineNames(); err != nil {
					return err
				}
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "run\tevent_id\ttimestamp\tstatus\tfragments\tdecision\tlines\tstage\treason\tbytes")
			listed := 0
			err = s.List(stream, sel, sf.limit, func(e storage.EventInfo) bool {
				listed++
				fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%d\n", e.Key.Run, e.Key.EventID, formatTS(e.Timestamp),
					e.Status, e.NumFragments, e.Verdict.Decision, lineList(e.Verdict.Lines, names[e.Verdict.Stage]),
					orDash(e.Verdict.Stage), orDash(e.Verdict.Reason.Text), e.Bytes)
				return true
			})
			if ferr := tw.Flush(); err == nil {
				err = ferr
			}
			if err == nil && listed == 0 {
				// An empty table alone reads like a broken store; say which
				// stream and selection were empty.
				fmt.Fprintf(cmd.OutOrStdout(), "no events in the %s stream for this selection (see --stream, --runs, --events)\n", stream)
			}
			return err
		},
	}
	stf.add(cmd)
	sf.add(cmd, "accepted")
	return cmd
}

// lineList names the lines set in a stored verdict's bitmask, with the
// line names its stage declared ("lineN" for a bit the store has no name
// for, e.g. a store written before the names were recorded); "-" for none.
func lineList(lines uint64, names []string) string {
	var out []string
	for _, name := range schemas.FiredLines(lines, names) {
		out = append(out, name)
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}

func newStoreExportCmd() *cobra.Command {
	var name, out string
	var force bool
	var stf storeFlags
	var sf selectionFlags
	names := exportNames()
	cmd := &cobra.Command{
		Use:   "export --path DIR --format " + strings.Join(names, "|") + " --out FILE [--stream S] [--runs A-B] [--events A-B] [--limit N]",
		Short: "Export events to a file: an Arrow IPC or Parquet table, or the records of a format they were split from (LHCb MDF, CMS FRD, ATLAS eformat, VDIF)",
		Long: `Exports the selected events of a stream to FILE in the format --format
names: ` + strings.Join(names, ", ") + `. Arrow IPC and Parquet hold the
events with their trigger decisions (the export schema); the other formats
join each event back into one record of the format its fragments were split
from (an event that does not join, e.g. one stored from another format, stops
the export naming it). Without --format, a FILE ending in a format's name
(e.g. x.parquet, x.mdf) takes that format; a FILE ending in another
format's name than --format says is refused, as is an existing FILE
unless --force.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stream, sel, err := sf.parse()
			if err != nil {
				return err
			}
			if out == "" {
				return errors.New("--out: the output file is required")
			}
			if ext := strings.TrimPrefix(filepath.Ext(out), "."); formats.Exporter(ext) != nil && !strings.EqualFold(ext, name) {
				if cmd.Flags().Changed("format") {
					return fmt.Errorf("--out %s names the %s format but --format is %s: rename the file or give --format %s", out, strings.ToLower(ext), name, strings.ToLower(ext))
				}
				name = strings.ToLower(ext)
			}
			e := formats.Exporter(name)
			if e == nil {
				return fmt.Errorf("--format %q: want %s", name, orList(names))
			}
			if _, err := os.Stat(out); err == nil && !force {
				return fmt.Errorf("--out %s exists; give --force to replace it", out)
			}
			s, err := stf.reader(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			// Write to a temporary name and rename, so that a failed export
			// leaves no truncated file that readers might take for whole.
			tmp := out + ".part"
			w, err := os.Create(tmp)
			if err != nil {
				return err
			}
			n, err := storage.WriteExport(e, w, nil, func(start func(*arrow.Schema) error, each func(arrow.RecordBatch) error) (int, error) {
				return s.ExportBatches(stream, storage.ExportOptions{Selection: sel, Limit: sf.limit}, start, each)
			})
			if cerr := w.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				err = os.Rename(tmp, out)
			}
			if err != nil {
				os.Remove(tmp)
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "exported %d %s events to %s (%s)\n", n, stream, out, name)
			return nil
		},
	}
	stf.add(cmd)
	cmd.Flags().StringVar(&name, "format", "arrow", orList(names))
	cmd.Flags().StringVar(&out, "out", "", "output file")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing output file")
	sf.add(cmd, "accepted")
	return cmd
}

// exportNames are the names --format takes, from the registry of formats.
func exportNames() []string {
	var names []string
	for _, e := range formats.Exporters() {
		names = append(names, e.ExportName())
	}
	return names
}

// orList writes names as "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
