package conf

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Decode decodes keys, the YAML keys of one mapping as written (each value
// a node with its line), into the struct v points to, by the yaml tags of
// its fields, and returns the problems, each with the key as its path. A
// key that names no field is a problem listing the keys valid there: v's
// and others (the keys of the same mapping that its owner decodes itself);
// a value of the wrong type is a problem that says the type wanted in an
// operator's words (PlainType). Fields whose key is absent keep their
// values (the defaults v was made with). The fields of v are scalars or
// types with their own UnmarshalYAML: a nested struct would be decoded
// without the unknown-key check.
func Decode(v any, keys map[string]yaml.Node, others ...string) Problems {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("conf.Decode: %T is not a pointer to a struct", v))
	}
	fields := map[string]reflect.Value{}
	for i, t := 0, rv.Elem().Type(); i < t.NumField(); i++ {
		if tag := Key(t.Field(i)); tag != "" {
			fields[tag] = rv.Elem().Field(i)
		}
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	// In the order they were written, so problems read like the file.
	sort.Slice(names, func(i, j int) bool {
		a, b := keys[names[i]], keys[names[j]]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return names[i] < names[j]
	})
	var ps Problems
	for _, k := range names {
		n := keys[k]
		f, ok := fields[k]
		if !ok {
			valid := append(Keys(v), others...)
			sort.Strings(valid)
			want := "takes no other keys"
			if len(valid) > 0 {
				want = "valid keys here: " + strings.Join(valid, ", ")
			}
			ps = append(ps, Problem{Path: k, Line: n.Line, Expected: fmt.Sprintf("unknown key %q (%s)", k, want)})
			continue
		}
		if err := n.Decode(f.Addr().Interface()); err != nil {
			var te *yaml.TypeError
			if !errors.As(err, &te) {
				ps = append(ps, Problem{Path: k, Line: n.Line, Expected: err.Error()})
				continue
			}
			for _, msg := range te.Errors {
				p, ok := ValueProblem(msg)
				if !ok {
					p = Problem{Line: n.Line, Expected: msg}
				}
				p.Path = k
				ps = append(ps, p)
			}
		}
	}
	return ps
}

// Keys lists the YAML keys of the struct v is or points to, in field order.
func Keys(v any) []string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		if k := Key(t.Field(i)); k != "" {
			out = append(out, k)
		}
	}
	return out
}

// Key is the YAML key of a struct field: its yaml tag's name, "" for a
// field without one, skipped ("-") or inlined.
func Key(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" || strings.Contains(opts, "inline") {
		return ""
	}
	return name
}

var (
	lineRe  = regexp.MustCompile(`^line (\d+): (.*)$`)
	valueRe = regexp.MustCompile("^cannot unmarshal (?:!!\\w+ )?`(.*)` into (.*)$")
)

// ValueProblem turns one message of a *yaml.TypeError about a value
// ("line 7: cannot unmarshal !!str `many` into uint32") into a problem
// with the line, the value as written and the type wanted in an operator's
// words; the path is left empty. ok is false for any other message.
func ValueProblem(msg string) (p Problem, ok bool) {
	m := lineRe.FindStringSubmatch(msg)
	if m == nil {
		return Problem{}, false
	}
	v := valueRe.FindStringSubmatch(m[2])
	if v == nil {
		return Problem{}, false
	}
	line, _ := strconv.Atoi(m[1])
	return Problem{Line: line, Value: strconv.Quote(v[1]), Expected: "want " + PlainType(v[2])}, true
}

// PlainType says a Go type from a yaml.v3 message in an operator's words
// ("time.Duration" is "a duration such as 500ms, 10s or 5m").
func PlainType(t string) string {
	switch t {
	case "time.Duration":
		return "a duration such as 500ms, 10s or 5m"
	case "int", "int64", "int32":
		return "a whole number"
	case "uint", "uint64", "uint32", "uint16", "uint8":
		return "a whole number >= 0 (" + t + ")"
	case "float64", "float32":
		return "a number"
	case "bool":
		// yaml.v3 also reads yes/no and on/off (any case) as booleans, and
		// refuses 1, 0 and quoted strings.
		return "true or false, unquoted (yes/no and on/off are read as true/false too)"
	case "string":
		return "a string"
	}
	if strings.HasPrefix(t, "map[") {
		return "a mapping (key: value)"
	}
	if strings.HasPrefix(t, "[]") {
		return "a list"
	}
	return t
}
