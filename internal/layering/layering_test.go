// Package layering holds one test: that sluice's packages import only
// downward, cmd → node → (builder, plugins, storage) → schemas, with
// internal/ helpers below the domain packages. It reads the import lists of
// every package's non-test files (with every build tag of the module on),
// so a new upward import fails `make test` with the pair that breaks it.
package layering

import (
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const module = "github.com/sluice-daq/sluice"

// forbidden maps a package prefix (relative to the module) to the prefixes
// its packages must not import. The longest matching prefix rules.
var forbidden = map[string][]string{
	"schemas":  {"builder", "plugins", "storage", "node", "cmd", "internal/buildtest"},
	"builder":  {"plugins", "storage", "node", "cmd"},
	"storage":  {"builder", "plugins", "node", "cmd"},
	"plugins":  {"builder", "storage", "node", "cmd"},
	"internal": {"plugins", "storage", "node", "cmd"},
	"node":     {"cmd"},
	// The transports and the peer transport are below the node's wiring
	// and below the farm that uses them.
	"node/transport": {"cmd", "node", "node/config", "node/emulator", "node/farm", "node/peer", "builder", "plugins", "storage"},
	"node/peer":      {"cmd", "node", "node/config", "node/emulator", "node/farm", "node/transport", "builder", "plugins", "storage"},
	"node/farm":      {"cmd", "node", "node/config", "node/emulator"},
	// The accelerator state and the deferral planner know nothing of the
	// node's parts: the node feeds them its measurements.
	"node/fill": {"cmd", "node", "node/config", "node/emulator", "node/farm", "node/peer", "node/transport", "builder", "plugins", "storage"},
}

// under reports whether pkg is prefix or inside it.
func under(pkg, prefix string) bool { return pkg == prefix || strings.HasPrefix(pkg, prefix+"/") }

// rule returns the forbidden list of the longest prefix of pkg in forbidden.
func rule(pkg string) (string, []string) {
	best := ""
	for p := range forbidden {
		if under(pkg, p) && len(p) > len(best) {
			best = p
		}
	}
	return best, forbidden[best]
}

// violates reports whether pkg importing imp breaks the rule bans. A ban of
// an ancestor of pkg (node/transport banning "node") means that package
// itself, not its subpackages, which pkg may need; any other ban is the
// whole tree under it.
func violates(pkg, imp string, bans []string) (string, bool) {
	for _, b := range bans {
		if under(pkg, b) {
			if imp == b {
				return b, true
			}
			continue
		}
		if under(imp, b) {
			return b, true
		}
	}
	return "", false
}

func root(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("module root not found from %s: %v", file, err)
	}
	return dir
}

func TestImportsPointDownward(t *testing.T) {
	ctx := build.Default
	ctx.BuildTags = []string{"ucx", "invariants"}
	top := root(t)
	checked := 0
	err := filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != top && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin" || name == "data") {
			return filepath.SkipDir
		}
		pkg, err := ctx.ImportDir(path, 0)
		if err != nil {
			return nil // no Go files here
		}
		rel, _ := filepath.Rel(top, path)
		rel = filepath.ToSlash(rel)
		prefix, bans := rule(rel)
		if prefix == "" {
			return nil
		}
		checked++
		for _, imp := range pkg.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			imp = strings.TrimPrefix(imp, module+"/")
			if b, bad := violates(rel, imp, bans); bad {
				t.Errorf("%s imports %s: packages under %s must not import %s", rel, imp, prefix, b)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 30 {
		t.Fatalf("only %d packages checked: the walk missed the tree", checked)
	}
}

// The rules must be able to fail: a few imports they must refuse.
func TestRulesRefuseUpwardImports(t *testing.T) {
	for _, c := range []struct{ pkg, imp string }{
		{"schemas/lhcb", "builder"},
		{"builder", "node/config"},
		{"storage", "plugins"},
		{"plugins/sdk", "node"},
		{"node/transport/tcp", "node"},
		{"node/peer/tcp", "node/farm"},
		{"node/farm/control", "node"},
		{"node/e2e", "cmd/sluice"},
	} {
		_, bans := rule(c.pkg)
		if _, bad := violates(c.pkg, c.imp, bans); !bad {
			t.Errorf("%s importing %s is allowed by the rules", c.pkg, c.imp)
		}
	}
	for _, c := range []struct{ pkg, imp string }{
		{"node", "node/transport/all"},
		{"node/farm", "node/peer"},
		{"node/transport/tcp", "node/transport/internal/sock"},
		{"builder", "schemas"},
		{"cmd/sluice", "node"},
	} {
		_, bans := rule(c.pkg)
		if b, bad := violates(c.pkg, c.imp, bans); bad {
			t.Errorf("%s importing %s is refused (%s) but points downward", c.pkg, c.imp, b)
		}
	}
}
