package config

import (
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/sluice-daq/sluice/internal/conf"
)

// HTTP is the node's HTTP endpoint (/metrics, /status, /healthz, /readyz,
// POST /run/stop).
//
// POST /run/stop changes the run, so it refuses browser cross-site requests
// always and, with TokenFile set, requests without the token. A node bound
// to an address other than loopback must have a TokenFile, and hides file
// paths from /status and /metrics unless ShowPaths is set.
type HTTP struct {
	Address string `yaml:"address"` // HOST:PORT; "off" disables it
	// TokenFile names a file holding the token POST /run/stop requires
	// (sent as "Authorization: Bearer TOKEN"; surrounding white space in
	// the file is ignored). Required when Address is not a loopback
	// address; optional, and then enforced, on loopback.
	TokenFile string `yaml:"token_file"`
	// ShowPaths lets /status and /metrics show file paths (store directory,
	// plugin binaries, file:// inputs) on an address other than loopback.
	// On loopback they are always shown.
	ShowPaths bool `yaml:"show_paths"`
}

// MinTokenLength is the shortest token TokenFile may hold, in bytes, so
// that the token cannot be guessed over the network.
const MinTokenLength = 16

// Loopback reports whether Address names a loopback host ("localhost" or
// a loopback IP such as 127.0.0.1 or ::1), reachable from this machine
// only. Any other host, including an empty one (every interface), is not.
func (h HTTP) Loopback() bool {
	host, _, err := net.SplitHostPort(h.Address)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Validate checks the section; problem paths are relative to it.
func (h HTTP) Validate() conf.Problems {
	var ps conf.Problems
	if h.Address == "off" {
		return ps
	}
	if _, port, err := net.SplitHostPort(h.Address); err != nil || !validPort(port, true) {
		ps.Add("address", h.Address, `want HOST:PORT (e.g. 127.0.0.1:9464) or "off"`)
		return ps
	}
	if h.TokenFile == "" && !h.Loopback() {
		ps.Add("token_file", nil, "want a file holding the token POST /run/stop requires, since address %q is not loopback (or bind to 127.0.0.1)", h.Address)
	}
	return ps
}

// Preflight checks that the token file holds a usable token.
func (h HTTP) Preflight() conf.Problems {
	var ps conf.Problems
	if h.Address == "off" || h.TokenFile == "" {
		return ps
	}
	if _, err := h.Token(); err != nil {
		ps.Add("token_file", h.TokenFile, "%v", err)
	}
	return ps
}

// Token reads the token from TokenFile ("" when none is configured). The
// error says what is wrong: an unreadable file or a token shorter than
// MinTokenLength.
func (h HTTP) Token() (string, error) {
	if h.TokenFile == "" {
		return "", nil
	}
	b, err := os.ReadFile(h.TokenFile)
	if err != nil {
		return "", fmt.Errorf("want a readable file holding the token (%v)", unwrapPath(err))
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < MinTokenLength || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("want a token of at least %d bytes without white space (e.g. from `openssl rand -hex 16`); the file holds %d bytes", MinTokenLength, len(tok))
	}
	return tok, nil
}
