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
// ErrUnknownTransport (see Missing), ErrConfig, or the transport's own
// (e.g. the listen address is taken).
func Open(name string, cfg Config) (Transport, error) {
	regMu.Lock()
	open := registry[name]
	regMu.Unlock()
	if open == nil {
		return nil, Missing(name)
	}
	return open(cfg)
}

// Known are the transports sluice has, whether or not this binary was built
// with them.
var Known = []string{"tcp", "ucx"}

// BuildUCX says how to get a binary with the UCX transport.
const BuildUCX = "install libucx-dev (Debian; ucx-utils for ucx_perftest) and rebuild with the ucx build tag: `make build` sets it when `pkg-config --exists ucx`, or `go build -tags ucx ./cmd/sluice`"

// Missing is the error for a transport name this binary has not registered
// (nil if it has): ErrUnknownTransport, saying which it has and, for a
// known transport built out (ucx without the ucx tag), how to build it in.
func Missing(name string) error {
	have := Names()
	for _, n := range have {
		if n == name {
			return nil
		}
	}
	if name == "ucx" {
		return fmt.Errorf("%w %q: this sluice binary was built without UCX (it has: %s); %s", ErrUnknownTransport, name, strings.Join(have, ", "), BuildUCX)
	}
	return fmt.Errorf("%w %q: want one of %s (this binary has: %s)", ErrUnknownTransport, name, strings.Join(Known, ", "), strings.Join(have, ", "))
}
