// Package wire is what the trigger host (package plugins) and the plugin SDK
// (plugins/sdk) share: the go-plugin handshake, the gRPC limits, the
// go-plugin glue for the sluice.trigger.v1 service, the Arrow IPC framing of
// event batches and the shared-memory regions that carry them.
package wire

import (
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// ProtocolVersion is the base trigger protocol version spoken in the
// go-plugin handshake: the service of the proto package sluice.trigger.v1,
// one Decide call at a time per plugin process. A host refuses plugins that
// speak neither it nor ProtocolPipelined.
const ProtocolVersion = 1

// ProtocolPipelined (handshake version 2) is the same service with Decide
// calls that may overlap: the host sends up to a few batches to one process
// before the first is answered, numbered BatchSeq 1, 2, 3, … over the
// process's life without gaps, and the plugin decides them one at a time
// in BatchSeq order (the SDK does). It hides the round trip between batches;
// hosts and plugins that speak both settle on it in the handshake.
const ProtocolPipelined = 2

// PluginName is the name of the one plugin a trigger binary serves.
const PluginName = "trigger"

// Handshake is the go-plugin handshake of sluice trigger plugins. The magic
// cookie is not a security measure: it lets a plugin binary run by hand say
// that it is a plugin instead of hanging.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "SLUICE_TRIGGER_PLUGIN",
	MagicCookieValue: "f7c2a9d4-sluice-trigger-v1",
}

// MaxMessageBytes bounds a gRPC message in either direction. gRPC's default
// of 4 MiB is far below an inline event batch; 1 GiB leaves room for the
// largest batch the builder makes plus its framing.
const MaxMessageBytes = 1 << 30

// ServerOptions are the gRPC options a plugin's server needs: message size
// limits raised in both directions.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes)}
}

// DialOptions are the host's matching gRPC client options.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes))}
}
