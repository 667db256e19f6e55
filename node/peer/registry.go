package peer

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

var (
	regMu    sync.Mutex
	registry = map[string]func(Config) (Transport, error){}
	about    = map[string]func() string{}
)

// Describe gives the transport registered under name a description for
// `sluice version` (e.g. the library version found at run time).
func Describe(name string, describe func() string) {
	regMu.Lock()
	defer regMu.Unlock()
	about[name] = describe
}

// About is the description of name's transport, "" if it has none.
func About(name string) string {
	regMu.Lock()
	f := about[name]
	regMu.Unlock()
	if f == nil {
		return ""
	}
	return f()
}

// Register makes a transport available to Open under name. Transport
// packages call it from init (node/peer/tcp: "tcp"; node/peer/ucx, built
// with the ucx tag: "ucx"), so a binary offers the ones it imports. It
// panics on a duplicate name (a programming error).
func Register(name string, open func(Config) (Transport, error)) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("peer: transport " + name + " registered twice")
	}
	registry[name] = open
}

// Names lists the registered transports, sorted.
func Names() []string {
	regMu.Lock()
	defer regMu.Unlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Open starts the transport registered under name with cfg. Errors:
// ErrUnknownTransport (naming those available), ErrConfig, or the
// transport's own (e.g. the listen address is taken).
func Open(name string, cfg Config) (Transport, error) {
	regMu.Lock()
	open := registry[name]
	regMu.Unlock()
	if open == nil {
		return nil, fmt.Errorf("%w %q (this binary has: %s)", ErrUnknownTransport, name, strings.Join(Names(), ", "))
	}
	return open(cfg)
}
