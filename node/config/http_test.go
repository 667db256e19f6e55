package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHTTPTokenRequiredOffLoopback: a node listening on an address other
// than loopback must name a token file, and the file must hold a token.
func TestHTTPTokenRequiredOffLoopback(t *testing.T) {
	for addr, needsToken := range map[string]bool{
		"127.0.0.1:9464": false, "127.0.0.2:0": false, "[::1]:9464": false, "localhost:0": false,
		"0.0.0.0:9464": true, ":9464": true, "[::]:0": true, "10.1.2.3:9464": true, "daq-node-7:9464": true,
	} {
		c, err := Parse([]byte(minimal + "http: {address: \"" + addr + "\"}\n"))
		if !needsToken {
			if err != nil {
				t.Errorf("%s: %v", addr, err)
			}
			continue
		}
		var ce *Error
		if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Path != "http.token_file" ||
			!strings.Contains(err.Error(), "want a file holding the token POST /run/stop requires, since address "+`"`+addr+`"`+" is not loopback") {
			t.Errorf("%s without a token file: %v (config %+v)", addr, err, c)
		}
	}

	dir := t.TempDir()
	good := filepath.Join(dir, "token")
	if err := os.WriteFile(good, []byte("  0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		good:                       "",
		short:                      `http.token_file: "` + short + `": want a token of at least 16 bytes without white space (e.g. from ` + "`openssl rand -hex 16`" + `); the file holds 6 bytes`,
		filepath.Join(dir, "none"): `http.token_file: "` + filepath.Join(dir, "none") + `": want a readable file holding the token (no such file or directory)`,
	} {
		c, err := Parse([]byte(minimal + "http: {address: \"0.0.0.0:0\", token_file: " + file + "}\n"))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		err = c.Preflight()
		if want == "" {
			if err != nil {
				t.Errorf("%s: %v", file, err)
			} else if tok, err := c.HTTP.Token(); tok != "0123456789abcdef0123" || err != nil {
				t.Errorf("Token() = %q, %v", tok, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("preflight of %s: %v\nwant %s", file, err, want)
		}
	}
}
