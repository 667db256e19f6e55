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
				_, err := fmt.Fprintln(cmd.OutOrStdout(), versionLine())
				return err
			},
		}
	})
}

// versionLine is what `sluice version` and `sluice --version` print.
func versionLine() string {
	return fmt.Sprintf("sluice %s (commit %s, %s %s/%s)", version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
