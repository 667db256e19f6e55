package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

func init() {
	register(func() *cobra.Command {
		return &cobra.Command{
			Use:   "version",
			Short: "Print sluice's version, commit and Go version",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "sluice %s (commit %s, %s %s/%s)\n",
					version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
				return err
			},
		}
	})
}
