package plugins

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// bin holds the example and test plugin binaries, built once by TestMain.
var bin string

// pluginPackages are built into bin, each under its last path element.
var pluginPackages = []string{
	"./examples/passthrough", "./examples/l0calo", "./examples/gec",
	"./internal/testplugins/panicky", "./internal/testplugins/hang",
	"./internal/testplugins/wrongproto", "./internal/testplugins/notplugin",
	"./internal/testplugins/orphanhost", "./internal/testplugins/chatty", "./internal/testplugins/longline",
	"./internal/testplugins/talker", "./internal/testplugins/v1only", "./internal/testplugins/procs",
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-plugins-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = dir
	var pkgs []string
	for _, p := range pluginPackages {
		if _, err := os.Stat(p); err == nil {
			pkgs = append(pkgs, p)
		}
	}
	// Plugins are built without -race: they are the subject of the tests,
	// not their object, and start much faster that way.
	cmd := exec.Command("go", append([]string{"build", "-o", dir + "/"}, pkgs...)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building plugins:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// pluginPath is the path of a plugin binary built by TestMain.
func pluginPath(name string) string { return filepath.Join(bin, name) }
