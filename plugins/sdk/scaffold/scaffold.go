// Package scaffold writes a new trigger plugin project (what `sluice plugin
// new` makes): main.go implementing sdk.Trigger with a small example
// selection, main_test.go running it in process through triggertest, a
// Makefile (build, test, check), a README, and go.mod and go.sum that build
// offline against a local sluice checkout through a replace directive.
package scaffold

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"text/template"
)

// Module is the module path the generated projects depend on.
const Module = "github.com/sluice-daq/sluice"

var validName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// CheckName returns an error unless name can name a plugin project: its Go
// module, its binary and its trigger type.
func CheckName(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("name %q: use lower-case letters, digits and _ (a Go identifier)", name)
	}
	return nil
}

// ReplacePath is the path go.mod's replace directive of a project in dir
// gives the sluice checkout sluiceDir: relative to dir ("../sluice",
// "./vendor/sluice": go wants the leading ./ or ../) when the two share a
// directory below the root, else sluiceDir itself (a path up to / and
// down again would break whichever moved). Errors: dir has no absolute
// form.
func ReplacePath(dir, sluiceDir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(abs, sluiceDir)
	if err != nil {
		return sluiceDir, nil
	}
	ups := 0
	for _, part := range strings.Split(filepath.ToSlash(rel), "/") {
		if part == ".." {
			ups++
		}
	}
	if depth := len(strings.Split(strings.Trim(filepath.ToSlash(abs), "/"), "/")); ups >= depth {
		return sluiceDir, nil // only the root in common
	}
	if rel != ".." && !strings.HasPrefix(rel, "../") {
		rel = "./" + rel
	}
	return rel, nil
}

// Write writes the project of plugin name into dir (created; it must not
// exist), building against the sluice checkout sluiceDir (an absolute
// path); sluice is the command its Makefile's check target runs by default
// (SLUICE; see Command). go.mod requires sluice through the replace
// directive (ReplacePath: relative to dir where it can be, so that the
// checkout and the project may move together) plus every module sluice
// requires, at sluice's versions, and go.sum is sluice's, so that the
// project builds from the module cache alone.
func Write(dir, name, sluiceDir, sluice string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(sluiceDir, "go.mod"))
	if err != nil {
		return err
	}
	gosum, err := os.ReadFile(filepath.Join(sluiceDir, "go.sum"))
	if err != nil {
		return err
	}
	text := string(gomod)
	i := strings.Index(text, "\nrequire")
	if i < 0 {
		return fmt.Errorf("%s/go.mod has no require block", sluiceDir)
	}
	goLine := "go 1.26.0"
	for _, l := range strings.Split(text[:i], "\n") {
		if strings.HasPrefix(l, "go ") {
			goLine = l
		}
	}
	replace, err := ReplacePath(dir, sluiceDir)
	if err != nil {
		return err
	}
	data := struct {
		Name, Type, Module, SluiceDir, Replace, Sluice, GoLine, Requires string
	}{
		Name: name, Type: strings.ReplaceAll(name, "_", "") + "Trigger", Module: Module,
		SluiceDir: sluiceDir, Replace: replace, Sluice: sluice, GoLine: goLine, Requires: strings.TrimSpace(text[i:]),
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	for file, tmpl := range templates {
		var b strings.Builder
		if err := template.Must(template.New(file).Parse(tmpl)).Execute(&b, data); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "go.sum"), gosum, 0o644)
}

// CheckSluiceDir returns dir made absolute, or an error when it holds no
// go.mod of the sluice module.
func CheckSluiceDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if !isSluiceDir(abs) {
		return "", fmt.Errorf("%s: no go.mod of module %s there", abs, Module)
	}
	return abs, nil
}

// FindSluiceDir returns the sluice checkout to build plugins against: the
// source tree the running binary was built from (its file paths are in the
// binary unless built with -trimpath), else an ancestor of the executable
// or of the working directory holding sluice's go.mod.
func FindSluiceDir() (string, error) {
	var starts []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, d := range starts {
		for ; ; d = filepath.Dir(d) {
			if isSluiceDir(d) {
				return d, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", fmt.Errorf("cannot find a sluice checkout (tried %v)", starts)
}

// isSluiceDir reports whether dir holds the go.mod of the sluice module.
func isSluiceDir(dir string) bool { return moduleOf(dir) == Module }

// moduleOf returns the module path on the first line of dir's go.mod (the
// line sluice's go.mod and the generated ones start with), or "".
func moduleOf(dir string) string {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	if !s.Scan() {
		return ""
	}
	m, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module ")
	if !ok {
		return ""
	}
	return strings.TrimSpace(m)
}

// Command is the default SLUICE of a generated Makefile: the resolved
// absolute path of the running binary (sluice, writing the project), so
// that `make check` works without sluice on PATH. It is "sluice" (found on
// PATH) when the path is unknown or holds characters a make variable
// cannot carry unquoted.
func Command() string {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil || !filepath.IsAbs(exe) || strings.ContainsAny(exe, " \t\n$#\\'\"") {
		return "sluice"
	}
	return exe
}

// ProjectBinary returns where the Makefile of the project in dir (one that
// Write wrote: go.mod's module is the plugin's name) builds the plugin, and
// false if dir has no go.mod.
func ProjectBinary(dir string) (string, bool) {
	name := moduleOf(dir)
	if name == "" {
		return "", false
	}
	return filepath.Join(dir, "bin", filepath.Base(name)), true
}
