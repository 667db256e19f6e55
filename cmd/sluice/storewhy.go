package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-daq/sluice/storage"
)

// newStoreWhyCmd builds `sluice store why RUN EVENT`: one stored event's
// provenance.
func newStoreWhyCmd() *cobra.Command {
	var stf storeFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "why --path DIR RUN EVENT [--json]",
		Short: "Why an event is in the store: its sources, status and every trigger pass over it",
		Long: `Prints what the store knows of one event: the stream it is in, its status,
which sources contributed and which were missing or corrupt, the stored
verdict, and every trigger pass over it (the online pass, then each replay
that decided it, with when): for each stage that saw the event its plugin
(name, version, sha256 of the executable), the decision, the lines the plugin
fired, those the prescales kept and removed, and the reason. Works through a
running node's Arrow Flight endpoint as the other store commands do.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			run, err := strconv.ParseUint(args[0], 10, 32)
			if err != nil {
				return &exitError{code: exitConfig, err: fmt.Errorf("RUN %q: want a run number", args[0])}
			}
			id, err := strconv.ParseUint(args[1], 10, 64)
			if err != nil {
				return &exitError{code: exitConfig, err: fmt.Errorf("EVENT %q: want an event id", args[1])}
			}
			s, err := stf.reader(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			w, err := s.Why(uint32(run), id)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(w)
			}
			return writeWhy(cmd.OutOrStdout(), w)
		},
	}
	stf.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (storage.Why)")
	return cmd
}

func writeWhy(w io.Writer, y storage.Why) error {
	status := "ok"
	if len(y.Status) > 0 {
		status = strings.Join(y.Status, ",")
	}
	fmt.Fprintf(w, "run %d event %d: %s stream, timestamp %s\n", y.Run, y.EventID, y.Stream, formatTS(y.Timestamp))
	fmt.Fprintf(w, "  status %s, %d fragments, %d bytes stored\n", status, y.Fragments, y.Bytes)
	src := y.Sources
	dup := idList(src.Duplicated)
	if src.Duplicates && len(src.Duplicated) == 0 {
		dup = "yes (sources not recorded)" // stored before the store kept them
	}
	fmt.Fprintf(w, "  sources: %d of %d contributed; missing %s; corrupt %s; duplicated %s; late %s; source errors %s\n",
		src.Contributed, src.Expected, idList(src.Missing), idList(src.Corrupt), dup, idList(src.Late), yesNo(src.SourceError))
	if b := y.Built; b.BU != "" {
		fmt.Fprintf(w, "  built by %s (incarnation %s) for assignment %d\n", b.BU, b.Incarnation, b.Assignment)
	}
	fmt.Fprintf(w, "  verdict: %s by %s, lines %s, reason %s\n", y.Decision, orDash(y.Stage), orDash(strings.Join(y.Lines, ",")), orDash(y.Reason))
	if len(y.Passes) == 0 {
		fmt.Fprintln(w, "  no trigger passes recorded (stored by a sluice that kept no provenance)")
		return nil
	}
	for _, p := range y.Passes {
		kind := "online"
		if p.Replay {
			kind = "replay"
		}
		fmt.Fprintf(w, "  pass %d (%s), stored %s:\n", p.Pass, kind, p.At.Format(time.RFC3339Nano))
		if len(p.Steps) == 0 {
			fmt.Fprintln(w, "    no stage saw it")
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "    stage\tplugin\tversion\tsha256\tdecision\tfired\tkept\tprescaled\treason")
		for _, st := range p.Steps {
			fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", orDash(st.Stage), orDash(st.Plugin), orDash(st.Version), orDash(st.SHA256),
				st.Decision, orDash(strings.Join(st.Fired, ",")), orDash(strings.Join(st.Kept, ",")), orDash(strings.Join(st.Prescaled, ",")), orDash(st.Reason))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func idList(ids []uint32) string {
	if len(ids) == 0 {
		return "-"
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatUint(uint64(id), 10)
	}
	return strings.Join(parts, ",")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
