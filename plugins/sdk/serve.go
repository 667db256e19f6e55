package sdk

import (
	"os"
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
func Serve(t Trigger) {
	log := Logger(t.Describe().Name)
	go exitWithParent(log)
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: wire.Handshake,
		Plugins:         plugin.PluginSet{wire.PluginName: &wire.GRPCPlugin{Impl: &server{t: t, log: log}}},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, wire.ServerOptions()...)...)
		},
		Logger: log,
	})
}

// Logger returns the plugin's logger: JSON lines on standard error, which
// the host reads and re-logs in the node's log under the plugin's name.
func Logger(name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.Info, Output: os.Stderr, JSONFormat: true})
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
