package e2e

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPluginsExitBeforeLedger: `sluice run` and `sluice replay` close their
// trigger chains, so the plugins' exit log lines come before the ledger,
// not after it (stdout and stderr share one pipe here, as on a terminal).
func TestPluginsExitBeforeLedger(t *testing.T) {
	file, _ := demoConfig(t, "4")
	for _, c := range []struct {
		args     []string
		firstRow string // the ledger's first row after its title
	}{
		{[]string{"run", "--config", file}, "of which start-up"},
		{[]string{"replay", "--config", file}, "deferred events selected"},
	} {
		var out bytes.Buffer
		cmd := exec.Command(filepath.Join(bin, "sluice"), c.args...)
		cmd.Dir = repo
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Start()
		if err == nil {
			started.mu.Lock()
			started.pids = append(started.pids, cmd.Process.Pid)
			started.mu.Unlock()
			err = cmd.Wait()
		}
		if err != nil {
			t.Fatalf("sluice %v: %v\n%s", c.args, err, out.String())
		}
		s := out.String()
		table := strings.Index(s, c.firstRow)
		exited := strings.LastIndex(s, `"msg":"plugin process exited"`)
		if table < 0 || exited < 0 || exited > table {
			t.Errorf("sluice %s: plugin exit logged at %d, ledger at %d:\n%s", c.args[0], exited, table, s)
		}
	}
}
