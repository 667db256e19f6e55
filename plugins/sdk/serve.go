package sdk

import (
	"os"
	"runtime"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/sluice-daq/sluice/plugins/internal/wire"
)

// Serve runs t as a sluice trigger plugin and never returns. Run by hand
// (not by the node), the binary says that it is a plugin and exits with
// status 1. The plugin exits when its host dies, even when the host was
// killed with SIGKILL.
//
// Write nothing to standard output before Serve: go-plugin's handshake is
// the first line there, and the host refuses a plugin whose first line is
// anything else, quoting it. Once serving, each line written to os.Stdout,
// os.Stderr or descriptor 1 becomes a record "plugin stdout" or "plugin
// stderr" in the node's log (level INFO, rate-limited, cut at 4 KiB); use
// Logger for messages with a level and fields.
//
// Serve runs the plugin with GOMAXPROCS 1 unless the GOMAXPROCS
// environment variable says otherwise: a plugin decides one batch at a time
// on the node's own cores, and with one processor each call's hand-offs
// between goroutines (frame reader, Decide, response writer) stay on the
// thread already awake instead of waking a second one to look for work.
// That costs about a quarter less CPU per call (measured with the
// passthrough plugin and 64-event batches). A trigger that runs goroutines
// of its own in Decide sets GOMAXPROCS in the node's environment, which
// its plugins inherit.
func Serve(t Trigger) {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	log := Logger(t.Describe().Name)
	go exitWithParent(log)
	// One server for both protocol versions: it decides the calls one at a
	// time in BatchSeq order, which also serves a host that sends one at a
	// time (wire.ProtocolVersion).
	set := plugin.PluginSet{wire.PluginName: &wire.GRPCPlugin{Impl: newServer(t, log)}}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  wire.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{wire.ProtocolVersion: set, wire.ProtocolPipelined: set},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, wire.ServerOptions()...)...)
		},
		Logger: log,
	})
}

// stderr is the process's standard error as the host started it, read by
// the host: go-plugin's Serve later points os.Stderr at a pipe of its own.
var stderr = os.Stderr

// Logger returns a logger for the plugin's messages: JSON lines on the
// standard error the host reads and re-logs in the node's log under the
// plugin's name. Safe to call at any time, including after Serve started.
func Logger(name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.Info, Output: stderr, JSONFormat: true})
}

// exitWithParent ends the plugin when its parent (the node) is gone: the
// host also asks the kernel to kill its plugins when it dies (Pdeathsig on
// Linux), and this covers hosts on other systems and plugins started by a
// thread that has since exited.
func exitWithParent(log hclog.Logger) {
	parent := os.Getppid()
	for range time.Tick(250 * time.Millisecond) {
		if os.Getppid() != parent {
			log.Warn("host process is gone; exiting", "host_pid", parent)
			os.Exit(3)
		}
	}
}
