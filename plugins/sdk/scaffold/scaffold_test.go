package scaffold

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestWrite writes a project against this checkout and reads it back: every
// file, the replace directive, the trigger type, the Makefile's SLUICE; an
// existing directory and a bad name are refused.
func TestReplacePath(t *testing.T) {
	for _, c := range [][3]string{
		{"/srv/a/plugins/x", "/srv/a/sluice", "../../sluice"},
		{"/srv/a/sluice/myplugin", "/srv/a/sluice", ".."},
		{"/srv/a", "/srv/a/src/sluice", "./src/sluice"},
		{"/tmp/x/demo", "/srv/sluice", "/srv/sluice"}, // only / in common: absolute
	} {
		if got, err := ReplacePath(c[0], c[1]); err != nil || got != c[2] {
			t.Errorf("ReplacePath(%s, %s) = %q, %v; want %q", c[0], c[1], got, err, c[2])
		}
	}
}

func TestWrite(t *testing.T) {
	root, err := FindSluiceDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "plugins", "sdk", "scaffold")); err != nil {
		t.Fatalf("found checkout %s does not hold this package: %v", root, err)
	}
	dir := filepath.Join(t.TempDir(), "my_cut")
	if err := Write(dir, "my_cut", root, "/opt/sluice/bin/sluice"); err != nil {
		t.Fatal(err)
	}
	read := func(f string) string {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, f := range []string{"main.go", "main_test.go", "Makefile", "README.md", "go.mod", "go.sum", ".gitignore"} {
		read(f)
	}
	rel, err := ReplacePath(dir, root)
	if err != nil {
		t.Fatal(err)
	}
	if gomod := read("go.mod"); !strings.HasPrefix(gomod, "module my_cut\n") || !strings.Contains(gomod, "replace "+Module+" => "+rel+"\n") ||
		!strings.Contains(gomod, "go mod edit -replace "+Module+"=/path/to/sluice") {
		t.Errorf("go.mod:\n%s", gomod)
	}
	// A checkout beside the project: named relative to it.
	tmp := t.TempDir()
	fake := filepath.Join(tmp, "sluice")
	if err := os.Mkdir(fake, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil || os.WriteFile(filepath.Join(fake, f), b, 0o644) != nil {
			t.Fatal(f, err)
		}
	}
	if err := os.Mkdir(filepath.Join(tmp, "plugins"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(tmp, "plugins", "x"), "x", fake, "sluice"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(tmp, "plugins", "x", "go.mod")); !strings.Contains(string(b), "replace "+Module+" => ../../sluice\n") {
		t.Errorf("go.mod of a project beside its checkout:\n%s", b)
	}
	if main := read("main.go"); !strings.Contains(main, "type mycutTrigger struct") || !strings.Contains(main, `Name: "my_cut"`) {
		t.Errorf("main.go:\n%s", main)
	}
	if mk := read("Makefile"); !strings.Contains(mk, "\nSLUICE ?= /opt/sluice/bin/sluice\n") {
		t.Errorf("Makefile:\n%s", mk)
	}
	if bin, ok := ProjectBinary(dir); !ok || bin != filepath.Join(dir, "bin", "my_cut") {
		t.Errorf("ProjectBinary %q %v", bin, ok)
	}
	if err := Write(dir, "my_cut", root, "sluice"); err == nil {
		t.Error("an existing directory was written over")
	}
	for _, bad := range []string{"MyCut", "1cut", "my-cut", ""} {
		if err := Write(filepath.Join(t.TempDir(), "x"), bad, root, "sluice"); err == nil || !strings.Contains(err.Error(), "Go identifier") {
			t.Errorf("name %q: %v", bad, err)
		}
	}
	if _, err := CheckSluiceDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no go.mod of module "+Module) {
		t.Errorf("a directory without sluice's go.mod: %v", err)
	}
}

// TestTemplateREADME: the generated README describes every
// schemas.EventBatch accessor the generated main.go calls.
func TestTemplateREADME(t *testing.T) {
	used := regexp.MustCompile(`\bev\.(\w+)`).FindAllStringSubmatch(templates["main.go"], -1)
	if len(used) == 0 {
		t.Fatal("main.go template uses no accessor of the event batch")
	}
	for _, m := range used {
		if !strings.Contains(templates["README.md"], "`ev."+m[1]) {
			t.Errorf("README.md template does not describe ev.%s, which main.go uses", m[1])
		}
	}
}
