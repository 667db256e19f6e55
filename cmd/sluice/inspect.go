package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sluice-daq/sluice/internal/inspect"
)

func init() { register(newInspectCmd) }

// newInspectCmd builds `sluice inspect FILE [--events N] [--json]`.
func newInspectCmd() *cobra.Command {
	var (
		events   int
		asJSON   bool
		allowBad bool
	)
	cmd := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Detect a data file's format from its bytes and summarise it",
		Long: `Detects the format of FILE from its bytes (sluice fragments or multi-fragment
packets, LHCb MDF or MEP, VDIF, Mark 5B, CMS FRD, ATLAS eformat, and the Arrow
IPC and Parquet files of 'sluice store export') and prints what it holds:
records and events, sources, record sizes, checksum validity, time range, and
with --events N the detail of the first N rows: events, native fragments or
packets, VDIF/Mark 5B frames, table rows. Each detail column says what it
counts (record bytes, bank bytes, frame bytes, payload bytes). In --json the
rows are at .detail.rows for every format, with .detail.of naming them, and
each format's own fields under "cms", "atlas", "lhcb", "baseband" (VDIF,
Mark 5B) or "table" (Arrow IPC, Parquet). A damaged file is summarised up to
the damage, and the command fails naming the byte offset and what was
expected there. A file read to its end whose checksums are not all valid
fails too (exit 1) after its report, unless --allow-bad.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if events < 0 {
				return fmt.Errorf("--events must be >= 0, have %d", events)
			}
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			rep, ierr := inspect.Inspect(f, events)
			out := cmd.OutOrStdout()
			if asJSON {
				if err := inspect.WriteJSON(out, args[0], rep, ierr); err != nil {
					return err
				}
			} else if rep != nil {
				fmt.Fprintf(out, "%s\n", args[0])
				if err := inspect.WriteText(out, rep); err != nil {
					return err
				}
			}
			if ierr != nil {
				return fmt.Errorf("%s: %w", args[0], ierr)
			}
			if c := rep.Checksums; c.Bad > 0 && !allowBad {
				return fmt.Errorf("%s: %d of %d %s bad (give --allow-bad to accept a file with bad records)", args[0], c.Bad, c.Bad+c.Valid, c.What)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&events, "events", 0, "print the detail of the first N rows: events, native fragments or packets, VDIF/Mark 5B frames, table rows")
	cmd.Flags().BoolVar(&allowBad, "allow-bad", false, "exit 0 although checksums are bad (they are counted in the report)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON (with an \"error\" object when the file is damaged)")
	return cmd
}
