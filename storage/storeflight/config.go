package storeflight

import (
	"net"
	"time"

	"github.com/sluice-daq/sluice/internal/conf"
)

// Config is the node's flight section.
type Config struct {
	// Listen is host:port (port 0: any); "" or "off": no Flight endpoint.
	Listen string `yaml:"listen"`
	// TokenFile holds the token clients must send; TLSCert and TLSKey are
	// PEM files. All three are required when Listen is not a loopback
	// address.
	TokenFile string `yaml:"token_file"`
	TLSCert   string `yaml:"tls_cert"`
	TLSKey    string `yaml:"tls_key"`
	// CloseGrace is how long closing lets calls in progress finish (a
	// client reading an export) before it cuts them: at run end the node
	// waits no longer than this for its Flight clients. 0: DefaultCloseGrace.
	CloseGrace time.Duration `yaml:"close_grace"`
}

// DefaultCloseGrace is Config.CloseGrace by default.
const DefaultCloseGrace = 5 * time.Second

// DefaultConfig: an endpoint on 127.0.0.1, any port, a 5 s close grace.
func DefaultConfig() Config { return Config{Listen: "127.0.0.1:0", CloseGrace: DefaultCloseGrace} }

// Enabled says whether the node serves its store.
func (c Config) Enabled() bool { return c.Listen != "" && c.Listen != "off" }

// Validate lists c's problems (paths relative to the section).
func (c Config) Validate() conf.Problems {
	var ps conf.Problems
	if !c.Enabled() {
		return ps
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		ps.Add("listen", c.Listen, "want host:port, e.g. 127.0.0.1:0, or off")
		return ps
	}
	if c.CloseGrace < 0 {
		ps.Add("close_grace", c.CloseGrace.String(), "want a duration >= 0 (0: the default, 5s)")
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		ps.Add("tls_cert", c.TLSCert, "want both tls_cert and tls_key, or neither")
	}
	if !loopback(host) && (c.TLSCert == "" || c.TokenFile == "") {
		ps.Add("listen", c.Listen, "not a loopback address: want tls_cert, tls_key and token_file too")
	}
	return ps
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
