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
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bad := 0
			for _, file := range args {
				c, err := readConfig(cmd, file)
				err = checkConfig(file, c, err, preflight)
				if err != nil {
					fmt.Fprintln(cmd.OutOrStdout(), err)
					bad++
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok\n", file)
			}
			if bad > 0 {
				// Exit status 3, as `sluice run` does for the same problems.
				return &exitError{code: exitConfig, err: fmt.Errorf("%d of %d configuration file(s) have problems", bad, len(args))}
			}
			return nil
		},
	}
	validate.Flags().BoolVar(&preflight, "preflight", false,
		"also check what the config names on this machine: plugin binaries (each started once: its parameters, prescaled lines and source groups), emulator input files, the store directory")
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

// checkConfig is config.Check naming file in the problems: those found
// only by validating or preflight checks after a clean load come without
// the file's name.
func checkConfig(file string, c *config.Config, loadErr error, preflight bool) error {
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
