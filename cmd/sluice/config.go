package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sluice-daq/sluice/node/config"
)

func init() { register(newConfigCmd) }

// newConfigCmd builds `sluice config validate FILE | default`.
func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Check a node configuration, or print the commented default one",
	}
	var preflight bool
	validate := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check configuration files (- reads standard input); lists every problem with its field path and exits 3 on any",
		Long: `Check configuration files (- reads standard input): every problem with its field path, exit 3 on any.

Without --preflight only the files are checked, not this machine, so that a
configuration can be validated for another one: /dev/shm too small for the
plugin arena and the embedded emulators' rings, a store.min_free_bytes at or
above the store's file system, missing plugin binaries or emulator input files
are found by --preflight (and by sluice run, which runs it), not by a plain
validate.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bad := 0
			mode := config.NoPreflight
			if preflight {
				mode = config.PreflightRun
			}
			for _, file := range args {
				c, err := readConfig(cmd, file)
				err = checkConfig(file, c, err, mode)
				if err != nil {
					fmt.Fprintln(cmd.OutOrStdout(), err)
					bad++
					continue
				}
				if preflight {
					fmt.Fprintf(cmd.OutOrStdout(), "%s: ok\n", file)
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%s)\n", file, notOnThisMachine)
				}
			}
			if bad > 0 {
				// Exit status 3, as `sluice run` does for the same problems.
				return &exitError{code: exitConfig, err: fmt.Errorf("%d of %d configuration file(s) have problems", bad, len(args))}
			}
			return nil
		},
	}
	validate.Flags().BoolVar(&preflight, "preflight", false,
		"also check what the config needs of this machine: /dev/shm space for the plugin arena and rings, the store directory and its file system (store.min_free_bytes), plugin binaries (each started once: its parameters, prescaled lines and source groups), emulator input files")
	def := &cobra.Command{
		Use:   "default",
		Short: "Print the default configuration with every key commented",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(config.DefaultYAML)
			return err
		},
	}
	cmd.AddCommand(validate, def)
	return cmd
}

// notOnThisMachine is what a plain validate's "ok" says it did not check.
const notOnThisMachine = "the file only; --preflight also checks this machine: /dev/shm space, the store's file system, plugin binaries, input files"

// checkConfig is config.Check naming file in the problems: those found
// only by validating or preflight checks after a clean load come without
// the file's name.
func checkConfig(file string, c *config.Config, loadErr error, preflight config.Preflight) error {
	err := config.Check(c, loadErr, preflight)
	var ce *config.Error
	if errors.As(err, &ce) && ce.File == "" {
		ce.File = configName(file)
	}
	return err
}

// configName is how problems name file ("-": standard input).
func configName(file string) string {
	if file == "-" {
		return stdinName
	}
	return file
}

// stdinName names standard input in configuration problems.
const stdinName = "(stdin)"

// readConfig loads file, or standard input when file is "-".
func readConfig(cmd *cobra.Command, file string) (*config.Config, error) {
	if file == "-" {
		return config.Read(stdinName, cmd.InOrStdin())
	}
	return config.Load(file)
}
