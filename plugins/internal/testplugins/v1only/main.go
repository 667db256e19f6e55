// Command v1only is a test plugin that speaks only the base trigger
// protocol (handshake version 1, one Decide call at a time), as a plugin
// built before version 2 existed does, and accepts every event. It decodes
// inline batches only: run it with the host's Inline option.
package main

import (
	"context"
	"errors"

	"github.com/hashicorp/go-plugin"

	"github.com/sluice-daq/sluice/plugins/internal/pluginpb"
	"github.com/sluice-daq/sluice/plugins/internal/wire"
)

type server struct {
	pluginpb.UnimplementedTriggerServer
}

func (server) Describe(context.Context, *pluginpb.DescribeRequest) (*pluginpb.Description, error) {
	return &pluginpb.Description{Name: "v1only", Version: "0.1.0", Lines: []string{"all"}}, nil
}

func (server) Configure(context.Context, *pluginpb.ConfigureRequest) (*pluginpb.ConfigureResponse, error) {
	return &pluginpb.ConfigureResponse{}, nil
}

func (server) Decide(_ context.Context, req *pluginpb.DecideRequest) (*pluginpb.DecideResponse, error) {
	if req.GetInline() == nil {
		return nil, errors.New("v1only decodes inline batches only")
	}
	rec, release, err := wire.DecodeBatch(req.GetInline())
	if err != nil {
		return nil, err
	}
	defer release()
	n := int(rec.NumRows())
	resp := &pluginpb.DecideResponse{Verdicts: make([]pluginpb.Verdict, n), Lines: make([]uint64, n)}
	for i := range n {
		resp.Verdicts[i] = pluginpb.Verdict_VERDICT_ACCEPT
		resp.Lines[i] = 1
	}
	return resp, nil
}

func main() {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: wire.Handshake, // ProtocolVersion 1 only
		Plugins:         plugin.PluginSet{wire.PluginName: &wire.GRPCPlugin{Impl: server{}}},
		GRPCServer:      plugin.DefaultGRPCServer,
	})
}
