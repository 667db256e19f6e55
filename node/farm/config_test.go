package farm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPreflightToken: a farm node whose token file is missing or empty is
// a configuration problem found before anything starts (it failed only
// once the node's other parts had started, exit 1).
func TestPreflightToken(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(good, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, want string }{
		{filepath.Join(dir, "missing"), "no such file"},
		{empty, "is empty"},
		{good, ""},
	} {
		c := DefaultConfig()
		c.ID, c.TokenFile = "f1", tc.file
		ps := c.Preflight()
		switch {
		case tc.want == "" && len(ps) != 0:
			t.Errorf("%s: %v", tc.file, ps)
		case tc.want != "" && (len(ps) != 1 || !strings.Contains(ps[0].String(), tc.want) || !strings.Contains(ps[0].String(), "token_file")):
			t.Errorf("%s: problems %v, want one on token_file saying %q", tc.file, ps, tc.want)
		}
	}
	if ps := (Config{}).Preflight(); len(ps) != 0 {
		t.Errorf("not a farm: %v", ps)
	}
}
