package config

import (
	"fmt"
	"strings"

	"github.com/sluice-daq/sluice/internal/conf"
)

// Problem is one mistake in a configuration: where (the field path, e.g.
// "trigger.stages[1].plugin", and the YAML line when known), the value
// found, and what was expected.
type Problem = conf.Problem

// ByteSize is a number of bytes: a plain integer in YAML, or a string with
// a decimal ("500MB") or binary ("256MiB") unit.
type ByteSize = conf.ByteSize

// Error lists every problem found in one configuration, so an operator can
// fix them all at once instead of one per start attempt.
type Error struct {
	File     string // "" when parsed from bytes
	Problems []Problem
}

func (e *Error) Error() string {
	var b strings.Builder
	name := e.File
	if name == "" {
		name = "config"
	}
	fmt.Fprintf(&b, "%s: %d problem(s)", name, len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// errOf is nil without problems, else an *Error listing them.
func errOf(file string, ps conf.Problems) error {
	if len(ps) == 0 {
		return nil
	}
	return &Error{File: file, Problems: ps}
}
