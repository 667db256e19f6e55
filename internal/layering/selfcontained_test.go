package layering

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// outside matches names of places that a clone of the repository does not
// have: the development machine's directories and the design notes kept
// beside the repository. Each name's first letter is in a class of its
// own, so that this file does not itself name them.
var outside = regexp.MustCompile(`/[w]ork/|/[h]ome/[a-z]|\.\./[s]hared|\b([C]ALIBRATION|[F]ORMATS|[D]ESIGN|[F]ARM|[D]EVELOPERS)\.md\b`)

// outsideHints holds a substring of every match of outside (split like
// outside's names): a line with none of them cannot match, and is not run
// through the regular expression, which the race detector slows about
// thirteenfold (22 s for the tree; 1.7 s without it).
var outsideHints = []string{"/w" + "ork/", "/h" + "ome/", "../s" + "hared", ".md"}

// relPath matches a relative path that climbs directories; each match
// holds "../".
var relPath = regexp.MustCompile(`(?:\.\./)+[A-Za-z0-9_.-]+`)

// mayMatchOutside reports whether text holds one of outsideHints.
func mayMatchOutside(text string) bool {
	for _, h := range outsideHints {
		if strings.Contains(text, h) {
			return true
		}
	}
	return false
}

// TestSelfContained: no source, script, configuration or document of the
// repository names a path outside it, so that a clone explains itself.
// Relative paths that climb must end inside the repository.
func TestSelfContained(t *testing.T) {
	top := root(t)
	checked := 0
	err := filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != top && (strings.HasPrefix(name, ".") && name != ".ci" || name == "bin" || name == "data" || name == "golden") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(name) {
		case ".go", ".md", ".yaml", ".yml", ".sh", ".txt", ".json", ".proto":
		default:
			if name != "Makefile" && name != "run" {
				return nil
			}
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		rel, _ := filepath.Rel(top, path)
		checked++
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for line := 1; sc.Scan(); line++ {
			text := sc.Text()
			if !mayMatchOutside(text) && !strings.Contains(text, "../") {
				continue
			}
			if m := outside.FindString(text); m != "" && rel != filepath.Join("internal", "layering", "selfcontained_test.go") {
				t.Errorf("%s:%d names %q, outside the repository: %s", rel, line, m, strings.TrimSpace(text))
			}
			for _, m := range relPath.FindAllString(text, -1) {
				target := filepath.Join(filepath.Dir(path), m)
				if r, err := filepath.Rel(top, target); err != nil || strings.HasPrefix(r, "..") {
					t.Errorf("%s:%d: %q climbs out of the repository", rel, line, m)
				}
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d files read: the walk missed the tree", checked)
	}
}

// TestOutsideHints: each kind of name outside matches holds one of
// outsideHints, so the lines TestSelfContained skips cannot match.
func TestOutsideHints(t *testing.T) {
	for _, s := range []string{
		"see /w" + "ork/main/README", "in /h" + "ome/user/x", "../s" + "hared/notes",
		"the " + "C" + "ALIBRATION.md file", "F" + "ORMATS.md", "D" + "ESIGN.md", "F" + "ARM.md", "D" + "EVELOPERS.md",
	} {
		if outside.FindString(s) == "" {
			t.Errorf("%q: outside does not match it (the sample is stale)", s)
		}
		if !mayMatchOutside(s) {
			t.Errorf("%q matches outside but holds none of %q", s, outsideHints)
		}
	}
}
