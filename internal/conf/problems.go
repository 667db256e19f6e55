package conf

import (
	"fmt"
	"reflect"
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

// String is "PATH (line N): VALUE: EXPECTED", without the parts unknown.
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

// Problems lists the mistakes found in one configuration or section, in
// the order found. A section's Validate returns paths relative to the
// section ("mode", "stages[0].plugin", "" for the section as a whole); the
// caller places them under the section's path with In. The zero value is
// an empty list ready for Add.
type Problems []Problem

// Add appends the problem at path with the offending value (nil: none; a
// string-like value is quoted, others are printed with %v, so a ByteSize
// reads "1KiB" and a duration "0s") and the expectation, a format with
// args.
func (ps *Problems) Add(path string, value any, expected string, args ...any) {
	v := ""
	if value != nil {
		if reflect.ValueOf(value).Kind() == reflect.String {
			v = fmt.Sprintf("%q", value)
		} else {
			v = fmt.Sprintf("%v", value)
		}
	}
	*ps = append(*ps, Problem{Path: path, Value: v, Expected: fmt.Sprintf(expected, args...)})
}

// In returns the problems with their paths placed under prefix (see Join).
func (ps Problems) In(prefix string) Problems {
	out := make(Problems, len(ps))
	for i, p := range ps {
		p.Path = Join(prefix, p.Path)
		out[i] = p
	}
	return out
}

// String is the problems on one line, separated by "; " (for an error
// message).
func (ps Problems) String() string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, "; ")
}

// Join places the field path under prefix: "mode" under "builder" is
// "builder.mode", "[0].plugin" under "trigger.stages" is
// "trigger.stages[0].plugin", and "" is prefix itself.
func Join(prefix, path string) string {
	switch {
	case path == "":
		return prefix
	case prefix == "", path[0] == '[':
		return prefix + path
	}
	return prefix + "." + path
}

// Index is the path of element i of a list field: Index("stages", 2) is
// "stages[2]".
func Index(field string, i int) string { return fmt.Sprintf("%s[%d]", field, i) }
