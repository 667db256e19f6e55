package main

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluice-daq/sluice/node/peer"
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

// versionLine is what `sluice version` and `sluice --version` print: also
// the peer transports in the binary, UCX's version found at run time when
// it was built with UCX.
func versionLine() string {
	return fmt.Sprintf("sluice %s (commit %s, %s %s/%s; peer transports: %s)", version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH, peerTransports())
}

func peerTransports() string {
	var s []string
	ucx := false
	for _, n := range peer.Names() {
		if a := peer.About(n); a != "" {
			n += " (" + a + ")"
		}
		ucx = ucx || strings.HasPrefix(n, "ucx")
		s = append(s, n)
	}
	if !ucx {
		s = append(s, "no ucx: built without the ucx tag")
	}
	return strings.Join(s, ", ")
}
