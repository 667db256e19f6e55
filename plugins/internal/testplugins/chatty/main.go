// Command chatty is a test plugin that prints a line to standard output
// before it calls sdk.Serve, which go-plugin reads as its handshake.
package main

import (
	"fmt"

	"github.com/sluice-daq/sluice/plugins/sdk"
	"github.com/sluice-daq/sluice/schemas"
)

type chatty struct{}

func (chatty) Describe() sdk.Description {
	return sdk.Description{Name: "chatty", Version: "test", Lines: []string{"all"}}
}

func (chatty) Configure(params map[string]string) error { return sdk.CheckParams(params) }

func (chatty) Decide(_ *schemas.EventBatch, out []schemas.Verdict) error {
	for i := range out {
		out[i] = sdk.Accept(1)
	}
	return nil
}

func main() {
	fmt.Println("chatty: loading calibration\tv2 \x01")
	sdk.Serve(chatty{})
}
