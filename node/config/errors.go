package config

import (
	"fmt"
	"strings"
)

// Problem is one mistake in a configuration: where (the field path, e.g.
// "trigger.stages[1].plugin", and the YAML line when known), the value
// found, and what was expected.
type Problem struct {
	Path     string
	Line     int    // 0 when unknown
	Value    string // the offending value as written, "" when absent
	Expected string
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.Path)
	if p.Line > 0 {
		fmt.Fprintf(&b, " (line %d)", p.Line)
	}
	if p.Value != "" {
		fmt.Fprintf(&b, ": %s", p.Value)
	}
	fmt.Fprintf(&b, ": %s", p.Expected)
	return b.String()
}

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

// problems accumulates Problems with short helpers; the zero value is ready.
type problems struct{ list []Problem }

func (ps *problems) add(path string, value any, expected string, args ...any) {
	v := ""
	switch x := value.(type) {
	case nil:
	case string:
		v = fmt.Sprintf("%q", x)
	default:
		v = fmt.Sprintf("%v", x)
	}
	ps.list = append(ps.list, Problem{Path: path, Value: v, Expected: fmt.Sprintf(expected, args...)})
}

func (ps *problems) err(file string) error {
	if len(ps.list) == 0 {
		return nil
	}
	return &Error{File: file, Problems: ps.list}
}
