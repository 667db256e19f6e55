package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sluice-daq/sluice/schemas"
)

// newFarmMaskCmd builds `sluice farm mask`: run control masks a dead RU
// (a node) or sources for the rest of a run.
func newFarmMaskCmd(ff *farmFlags) *cobra.Command {
	var nodes []string
	var sources string
	var run uint32
	cmd := &cobra.Command{
		Use:   "mask [--run N] [--node ID]... [--sources LIST]",
		Short: "Mask nodes (their RU's sources) or sources for the rest of a run: BUs stop waiting for them, an event manager leads without them",
		Long: `Masks only grow within a run. A masked node's sources are those its membership
record lists when it is masked, or, for a node already gone, those every member
saw it read out. Events built without masked sources are incomplete, and the
BUs' ledgers count the missing fragments by source with the event ids.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ids, err := schemas.ParseSourceList(sources)
			if err != nil {
				return &exitError{code: exitConfig, err: fmt.Errorf("farm mask: --sources: %w", err)}
			}
			if len(nodes) == 0 && len(ids) == 0 {
				return &exitError{code: exitConfig, err: fmt.Errorf("farm mask: give --node or --sources")}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), ff.timeout)
			defer cancel()
			c, err := ff.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			if !cmd.Flags().Changed("run") {
				st, ok, err := c.RunState(ctx)
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("farm mask: farm %s never ran (give --run)", c.Farm())
				}
				run = st.Run
			}
			m, err := c.Mask(ctx, run, nodes, ids, whoami())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "farm %s, run %d: masked nodes %v, sources %q\n", c.Farm(), run, m.Nodes, schemas.FormatSourceList(m.SourceIDs()))
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&nodes, "node", nil, "node ids to mask (their RU's sources)")
	cmd.Flags().StringVar(&sources, "sources", "", "source list to mask, e.g. \"590824-591173,1048576\"")
	cmd.Flags().Uint32Var(&run, "run", 0, "run number (default: the farm's current run)")
	return cmd
}

// newFarmDrainCmd builds `sluice farm drain NODE`: the node stops taking
// work, finishes what it holds, says bye and leaves.
func newFarmDrainCmd(ff *farmFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "drain NODE",
		Short: "Ask a node to drain (no new work, finish what it holds) and leave the farm with a bye",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), ff.timeout)
			defer cancel()
			c, err := ff.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			d, err := c.Drain(ctx, args[0], whoami())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "farm %s: %s (incarnation %x) draining\n", c.Farm(), d.Node, d.Incarnation)
			return nil
		},
	}
}
