// Command sluice is the node program of a trigger/filter farm: it reads
// detector fragments, builds events, runs trigger plugins on them and keeps
// what they accept or defer. Each subcommand lives in its own file and
// registers its constructor with register in an init function, so every
// call of newRootCmd (and every test) gets a fresh command tree.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// Set at build time with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = "unknown"
)

// subcommands holds the constructors registered by each subcommand's file.
var subcommands []func() *cobra.Command

// register adds a subcommand constructor; call it from an init function.
func register(newCmd func() *cobra.Command) { subcommands = append(subcommands, newCmd) }

// newRootCmd builds the whole command tree afresh.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "sluice",
		Short:         "Node program of a trigger/filter farm: readout, event building, triggers, store",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionLine(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	for _, c := range subcommands {
		root.AddCommand(c())
	}
	return root
}

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(exitCode(err))
	}
}

// exitError carries a specific exit status (e.g. 2 for an unbalanced ledger).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	if e, ok := err.(*exitError); ok {
		return e.code
	}
	return 1
}
