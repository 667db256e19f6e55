package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sluice-daq/sluice/internal/conf"
)

// Load reads, parses and validates the configuration file at path. The
// returned error is an *Error listing every problem (unknown keys, values
// of the wrong type, invalid values), each with its field path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseNamed(path, data)
}

// Read is Load from r (e.g. standard input), name naming it in problems.
func Read(name string, r io.Reader) (*Config, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return parseNamed(name, data)
}

func parseNamed(name string, data []byte) (*Config, error) {
	c, err := Parse(data)
	var ce *Error
	if errors.As(err, &ce) {
		ce.File = name
	}
	return c, err
}

// movedKeys are keys earlier versions took, with where they went.
var movedKeys = map[string]string{
	"builder.memory_budget": "the memory budget bounds the whole node now: node.memory_budget (its split: node.memory_split)",
}

// Parse parses YAML (strictly: unknown keys are errors), fills defaults and
// validates. On problems it returns the partly filled Config and an *Error.
func Parse(data []byte) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, &Error{Problems: []Problem{{Path: "(document)", Expected: err.Error()}}}
	}
	paths := map[int][]linePath{}
	indexPaths(&root, "", paths)

	c := base()
	var ps conf.Problems
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			if err.Error() != "EOF" { // an empty file is the all-defaults config
				return nil, &Error{Problems: []Problem{{Path: "(document)", Expected: err.Error()}}}
			}
		} else {
			for _, msg := range te.Errors {
				ps = append(ps, decodeProblem(msg, paths))
			}
		}
	}
	c.decodeInputs(&ps)
	c.fillDefaults()
	c.validate(&ps)
	return c, errOf("", ps)
}

var (
	lineRe    = regexp.MustCompile(`^line (\d+): (.*)$`)
	unknownRe = regexp.MustCompile(`^field (\S+) not found in type`)
)

// linePath is one field on a line: its path and, for a scalar, its value.
type linePath struct{ path, value string }

// decodeProblem turns a yaml.v3 "line N: ..." message into a Problem with
// the field path of that line; on a line with several fields (flow style,
// "{a: 1, b: 2}") it picks the one the message names.
func decodeProblem(msg string, paths map[int][]linePath) Problem {
	m := lineRe.FindStringSubmatch(msg)
	if m == nil {
		return Problem{Path: "(document)", Expected: msg}
	}
	line, _ := strconv.Atoi(m[1])
	p := Problem{Path: "(document)", Line: line, Expected: m[2]}
	if on := paths[line]; len(on) > 0 {
		p.Path = on[0].path
	}
	if u := unknownRe.FindStringSubmatch(m[2]); u != nil {
		for _, lp := range paths[line] {
			if lp.path == u[1] || strings.HasSuffix(lp.path, "."+u[1]) {
				p.Path = lp.path
				break
			}
		}
		parent := ""
		if i := strings.LastIndexByte(p.Path, '.'); i >= 0 {
			parent = p.Path[:i]
		}
		p.Expected = fmt.Sprintf("unknown key %q (valid keys here: %s)", u[1], strings.Join(keysAt(parent), ", "))
		if m, ok := movedKeys[p.Path]; ok {
			p.Expected += "; " + m
		}
	} else if vp, ok := conf.ValueProblem(msg); ok {
		for _, lp := range paths[line] {
			if strconv.Quote(lp.value) == vp.Value {
				p.Path = lp.path
				break
			}
		}
		p.Value, p.Expected = vp.Value, vp.Expected
	}
	return p
}

// indexPaths records, for each line, the mapping keys and scalars on it with
// their dotted field paths ("trigger.stages[1].plugin").
func indexPaths(n *yaml.Node, path string, out map[int][]linePath) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			indexPaths(c, path, out)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			out[k.Line] = append(out[k.Line], linePath{path: p})
			indexPaths(v, p, out)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			indexPaths(c, fmt.Sprintf("%s[%d]", path, i), out)
		}
	case yaml.ScalarNode:
		out[n.Line] = append(out[n.Line], linePath{path: path, value: n.Value})
	}
}

// keysAt lists the YAML keys valid at a field path of Config.
func keysAt(path string) []string {
	t := reflect.TypeOf(Config{})
	if path != "" {
		for _, seg := range strings.Split(path, ".") {
			if i := strings.IndexByte(seg, '['); i >= 0 {
				seg = seg[:i]
			}
			f, ok := yamlFields(t)[seg]
			if !ok {
				return nil
			}
			t = f.Type
			for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
				t = t.Elem()
			}
		}
	}
	keys := slices.Collect(maps.Keys(yamlFields(t)))
	sort.Strings(keys)
	return keys
}

// yamlFields are the fields of struct type t by YAML key, those of inline
// structs (a section that embeds a package's own type) included; nil when
// t is not a struct.
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	if t.Kind() != reflect.Struct {
		return nil
	}
	out := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("yaml"), ",")
		switch {
		case slices.Contains(tag[1:], "inline"):
			maps.Copy(out, yamlFields(f.Type))
		case tag[0] != "" && tag[0] != "-":
			out[tag[0]] = f
		}
	}
	return out
}
