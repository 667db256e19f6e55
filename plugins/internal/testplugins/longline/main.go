// Command longline is a test plugin that prints one line of 100 KiB to
// standard output before it calls sdk.Serve: longer than the 64 KiB line
// go-plugin's handshake reader takes.
package main

import (
	"os"
	"strings"

	"github.com/sluice-daq/sluice/plugins/sdk"
	"github.com/sluice-daq/sluice/schemas"
)

type longline struct{}

func (longline) Describe() sdk.Description {
	return sdk.Description{Name: "longline", Version: "test", Lines: []string{"all"}}
}

func (longline) Configure(params map[string]string) error { return sdk.CheckParams(params) }

func (longline) Decide(_ *schemas.EventBatch, out []schemas.Verdict) error {
	for i := range out {
		out[i] = sdk.Accept(1)
	}
	return nil
}

func main() {
	os.Stdout.WriteString("longline: " + strings.Repeat("0123456789", 10<<10) + "\n")
	sdk.Serve(longline{})
}
