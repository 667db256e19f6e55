package wire

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/sluice-daq/sluice/plugins/internal/pluginpb"
)

// GRPCPlugin adapts the sluice.trigger.v1 service to go-plugin. In a plugin
// process Impl is the implementation to serve; in the host it is nil and
// GRPCClient hands out a pluginpb.TriggerClient.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl pluginpb.TriggerServer
}

// GRPCServer registers the trigger service on the plugin's gRPC server.
func (p *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pluginpb.RegisterTriggerServer(s, p.Impl)
	return nil
}

// GRPCClient returns a pluginpb.TriggerClient on the host side.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return pluginpb.NewTriggerClient(c), nil
}
