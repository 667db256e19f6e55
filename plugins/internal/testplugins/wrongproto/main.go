// Command wrongproto is a test plugin that completes the go-plugin handshake
// with the sluice magic cookie but announces trigger protocol version 99.
package main

import (
	"github.com/hashicorp/go-plugin"

	"github.com/sluice-daq/sluice/plugins/internal/wire"
)

func main() {
	h := wire.Handshake
	h.ProtocolVersion = 99
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: h,
		Plugins:         plugin.PluginSet{wire.PluginName: &wire.GRPCPlugin{}},
		GRPCServer:      plugin.DefaultGRPCServer,
	})
}
